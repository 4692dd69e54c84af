"""The rclpy plumbing the nodes, the CLI, the demo and the tests share (the nodes themselves are in `nodes/`).

- `common`: what every node shares: the single-threaded `run`, QoS, diagnostics; `parameters`: the `Spec`
  table every node declares its parameters from; `feedback`: joint-state subscriptions matched to publishers;
  `guards`: no service, action or lifecycle request takes a node's process down.
- `client`: a client node with a background executor; `processes`: starting and stopping node processes, DDS
  domain claims; `serialization`: exact CDR through the bag's typestore.
- `controller_gains`: a controller's gains through its parameter services, journaled; `controller_states`:
  controllers' states from the controller manager; `ros_plant`: the tuner's `Plant` over ROS (`RosArm`).
"""
