"""The rlbench backend: RLBench (CoppeliaSim 4.1 through PyRep) in a worker process.

Modules: `options` (task lookup and option checks, no simulator: the main process runs them),
`settings` (EnvConfig as RLBench's observation config, action mode and Environment options),
`backend` (RLBenchBackend, the registry's entry), `demos` (demo actions from recorded demos), `oracle` (the
task's waypoints as actions).

backend_options, passed to rlbench.Environment as given (upstream defaults otherwise):
  robot_setup             "panda" (default) or "sawyer": the observation layout has 7 arm joints
  static_positions, frequency, attach_grasped_objects (also given to the gripper action mode),
  shaped_rewards (only for tasks whose file defines reward()), arm_max_velocity,
  arm_max_acceleration, dataset_root
  randomize_every         "episode" or "transition" (RandomizeEvery by name), with
  visual_randomization_config: a dict of keyword arguments for VisualRandomizationConfig
                          (image_directory=..., ...). RLBench has no dynamics randomization.
and this backend's own:
  variation               fixed variation index; default: sampled at every reset
  task_state_size         length of task_low_dim_state (see `task_state_size`)
  collision_checking      for arm_mode "ik" / "planning" (default False, as upstream)
  frame                   "world" (default) or "ee": RelativeFrame of ik / planning delta actions
  reset_attempts          resets tried when RLBench cannot place the task (default 3)
  live_demos              True: get_demos plans demos live (the default without dataset_root);
                          False: it reads them from dataset_root (the default with it)
  oracle                  each step acts the next action of the task's own waypoints instead of the
                          action given (checked, then ignored): `rlbench_vec.evaluate --policy oracle`.
                          arm_mode "planning" or "ik"; out of waypoints, the episode ends
                          (info["oracle_exhausted"]). See `oracle`.
reset(options=...) keys, per env through the engine's options["env_options"]:
  variation               this reset's variation
  demo                    reset to stored episode `demo` of that variation (or of the fixed one) in
                          dataset_root with RLBench's reset_to_demo: the episode's exact initial scene
"""
