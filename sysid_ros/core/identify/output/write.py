"""Writing a result: `identified.yaml`, the identified MJCF (and URDF), the values, the library's own
output and the offline report, into one folder, all together or not at all (`files.outputs.staged`)."""

from __future__ import annotations

from pathlib import Path

import yaml
from mujoco import sysid

from ...files import model_path, staged
from ...report import DATA_FILE, report_page, save_report_data
from ..problem.file import Problem
from ..results import IdentificationResult, results_document
from ..rollout.quiet import quiet_output
from .export import identified_urdf, identified_values, identified_xml


def result_names(problem: Problem) -> dict[str, str]:
    """The names `write_results` writes inside its folder (the problem's `name` is a plain file name)."""
    names = {
        "yaml": "identified.yaml",
        "mjcf": f"{problem.name}.xml",
        "values": "identified_values.yaml",
        "library": "mujoco_sysid",
        "report": "report.html",
        "report_data": DATA_FILE,
    }
    if model_path(problem.model).suffix == ".urdf":
        names["urdf"] = f"{problem.name}.urdf"
    return names


def write_results(result: IdentificationResult, out_dir: str | Path, force: bool = False) -> dict[str, Path]:
    """Write identified.yaml, the identified MJCF at full precision, `identified_values.yaml` (the values
    by body/joint), the identified URDF when the model is one, the library's save_results output (in
    `mujoco_sysid/`) and an offline report.html (with its report_data.npz). Returns the paths written.

    Earlier results in `out_dir` are refused unless `force`; all outputs appear together or not at all
    (see `core.files.outputs`). Check the folder before a long run with `check_writable(out, result_names(..))`.
    """
    names = result_names(result.problem)
    document = results_document(result)
    source = model_path(result.problem.model)
    with staged(out_dir, list(names.values()), force) as tmp:
        paths = {key: tmp[name] for key, name in names.items()}
        if "urdf" in paths:
            urdf_text, urdf_notes = identified_urdf(source, result.identified_spec, result.problem.parameters)
            document["notes"] = document["notes"] + urdf_notes
            paths["urdf"].write_text(urdf_text)
        values = {p.name: p.value for p in result.parameters}  # the values the MJCF carries
        paths["yaml"].write_text(yaml.safe_dump(document, sort_keys=False))
        paths["values"].write_text(
            yaml.safe_dump(identified_values(result.problem.parameters, values), sort_keys=False)
        )
        paths["mjcf"].write_text(identified_xml(result.identified_spec, result.problem.parameters, result.opt_params))
        ms = result.model_sequences
        sysid.apply_param_modifiers_spec(result.opt_params, ms.spec)  # the library writes ms.spec as it is
        with quiet_output(result.problem.optimizer.quiet):
            sysid.save_results(
                paths["library"], [ms], result.initial_params, result.opt_params, result.opt_result, result.residual_fn
            )
        write_report(result, paths["report"])
    out = Path(out_dir).expanduser().resolve()
    return {key: out / name for key, name in names.items()}


def write_report(result: IdentificationResult, path: str | Path) -> Path:
    """Write the offline HTML report (drawn by `core.report.identification`) and, next to it, the traces it
    draws (`report_data.npz`)."""
    path = Path(path)
    problem = result.problem
    save_report_data(
        path.with_name(DATA_FILE), result.traces, result.objective, problem.position_noise_rad, problem.name
    )
    return report_page(
        results_document(result), result.traces, result.objective, problem.position_noise_rad, problem.name
    ).write(path)
