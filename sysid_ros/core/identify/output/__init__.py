"""Writing a result.

- `write`: `identified.yaml`, the report and the library's output in one staged folder (`write_results`).
- `export`: the identified MJCF, URDF and values.
"""
