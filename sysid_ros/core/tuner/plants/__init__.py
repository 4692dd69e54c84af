"""What the tuner moves: the `Plant` seam.

- `joint`: the seam (`Plant`, `Telemetry`) and one joint on MuJoCo (`SimPlant`, `twin_plant`).
- `arm`: a whole arm on SimRobot (`ArmPlant`); `at_rest`: whether an arm has come to rest before a play.
"""
