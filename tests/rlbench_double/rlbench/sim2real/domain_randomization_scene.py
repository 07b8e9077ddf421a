from double_log import record

from rlbench.backend.scene import Scene
from rlbench.sim2real.domain_randomization import RandomizeEvery


class DomainRandomizationScene(Scene):
    """As upstream: no dynamics randomization at all; textures change at init_episode for EPISODE, and
    every `frequency` simulation steps for VARIATION (= TRANSITION: one enum value). Each texture
    change is recorded as a "randomize" event."""

    def __init__(self, pyrep, obs_config, robot_setup='panda', randomize_every=RandomizeEvery.EPISODE,
                 frequency: int = 1, visual_randomization_config=None, dynamics_randomization_config=None):
        super().__init__(pyrep, obs_config, robot_setup)
        self._randomize_every = randomize_every
        self._frequency = frequency
        self._visual_rand_config = visual_randomization_config
        self._count = 0
        if dynamics_randomization_config is not None:
            raise NotImplementedError('Dynamics randomization coming soon! Only visual randomization available.')

    def _randomize(self):
        record("randomize", every=self._randomize_every, count=self._count)

    def init_episode(self, index: int, *args, **kwargs):
        descriptions = super().init_episode(index, *args, **kwargs)
        if self._randomize_every != RandomizeEvery.TRANSITION and (
                self._count % self._frequency == 0 or self._count == 0):
            self._randomize()
        if self._randomize_every == RandomizeEvery.EPISODE:
            self._count += 1
        return descriptions

    def step(self):
        if self._randomize_every == RandomizeEvery.TRANSITION:
            if self._count % self._frequency == 0 or self._count == 0:
                self._randomize()
            self._count += 1
        super().step()
