from os.path import exists

from double_log import record
from pyrep import PyRep

from rlbench.backend.scene import Scene
from rlbench.observation_config import ObservationConfig
from rlbench.sim2real.domain_randomization_scene import DomainRandomizationScene
from rlbench.task_environment import TaskEnvironment

SUPPORTED_ROBOTS = ('panda', 'jaco', 'mico', 'sawyer', 'ur5')


class Environment(object):
    """Each environment has a scene."""

    def __init__(self,
                 action_mode,
                 dataset_root: str = '',
                 obs_config: ObservationConfig = ObservationConfig(),
                 headless: bool = False,
                 static_positions: bool = False,
                 robot_setup: str = 'panda',
                 randomize_every=None,
                 frequency: int = 1,
                 visual_randomization_config=None,
                 dynamics_randomization_config=None,
                 attach_grasped_objects: bool = True,
                 shaped_rewards: bool = False,
                 arm_max_velocity: float = 1.0,
                 arm_max_acceleration: float = 4.0,
                 ):
        self._dataset_root = dataset_root
        self._action_mode = action_mode
        self._obs_config = obs_config
        self._headless = headless
        self._static_positions = static_positions
        self._robot_setup = robot_setup.lower()
        self._randomize_every = randomize_every
        self._frequency = frequency
        self._visual_randomization_config = visual_randomization_config
        self._dynamics_randomization_config = dynamics_randomization_config
        self._attach_grasped_objects = attach_grasped_objects
        self._shaped_rewards = shaped_rewards
        if robot_setup not in SUPPORTED_ROBOTS:
            raise ValueError('robot_configuration must be one of %s' % str(SUPPORTED_ROBOTS))
        if (randomize_every is not None and visual_randomization_config is None
                and dynamics_randomization_config is None):
            raise ValueError('If domain randomization is enabled, must supply either '
                             'visual_randomization_config or dynamics_randomization_config')
        if len(self._dataset_root) > 0 and not exists(self._dataset_root):
            raise RuntimeError('Data set root does not exists: %s' % self._dataset_root)
        record("environment", action_mode=action_mode, obs_config=obs_config, headless=headless,
               dataset_root=dataset_root, static_positions=static_positions, robot_setup=robot_setup,
               randomize_every=randomize_every, frequency=frequency,
               visual_randomization_config=visual_randomization_config,
               dynamics_randomization_config=dynamics_randomization_config,
               attach_grasped_objects=attach_grasped_objects, shaped_rewards=shaped_rewards,
               arm_max_velocity=arm_max_velocity, arm_max_acceleration=arm_max_acceleration)
        self._pyrep = None
        self._scene = None

    def launch(self):
        if self._pyrep is not None:
            raise RuntimeError('Already called launch!')
        self._pyrep = PyRep()
        self._pyrep.launch('task_design.ttt', headless=self._headless)
        if self._randomize_every is None:
            self._scene = Scene(self._pyrep, self._obs_config, self._robot_setup)
        else:
            self._scene = DomainRandomizationScene(
                self._pyrep, self._obs_config, self._robot_setup, self._randomize_every, self._frequency,
                self._visual_randomization_config, self._dynamics_randomization_config)
        record("scene", removed_cameras=self._scene.removed_cameras)

    def shutdown(self):
        if self._pyrep is not None:
            self._pyrep.shutdown()
        self._pyrep = None

    def get_task(self, task_class) -> TaskEnvironment:
        if self._pyrep is None:
            self.launch()
        self._pyrep.check_thread()
        task = task_class(self._pyrep, self._scene)
        record("get_task", task=task.get_name())
        return TaskEnvironment(
            self._pyrep, self._scene, self._scene, task, self._action_mode, self._dataset_root,
            self._obs_config, self._static_positions, self._attach_grasped_objects, self._shaped_rewards)
