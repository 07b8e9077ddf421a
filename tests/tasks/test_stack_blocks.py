import numpy as np
from task_checks import check_mjwarp, check_mujoco, config

from rlbench_vec.backends.mujoco import BACKEND
from rlbench_vec.backends.mujoco.tasks.base import COLORS
from rlbench_vec.backends.mujoco.tasks.stack_blocks import DISTRACTORS, TARGETS

TASK = "stack_blocks"


def test_stack_blocks_on_mujoco():
    check_mujoco(TASK, variations=60, first_description="stack 2 red blocks")


def test_stack_blocks_on_mjwarp():
    check_mjwarp(TASK)


def test_the_four_distractors_share_one_colour_as_upstream():
    """Upstream's indexing (colour_choices[i // 4] for i < 4) gives every distractor the first of two drawn
    colours; the targets have the variation's colour (variation v: colour v // 3)."""
    backend = BACKEND(config(TASK), 0)
    try:
        colours = set()
        for seed in range(4):
            backend.reset(seed, {"variation": 3 * 5})
            rgba = backend.sim.model.geom_rgba
            targets = {tuple(rgba[backend.sim.model.geom(name).id][:3]) for name in TARGETS}
            distractors = {tuple(rgba[backend.sim.model.geom(name).id][:3]) for name in DISTRACTORS}
            assert targets == {tuple(np.float32(COLORS[5][1]))} and len(distractors) == 1 and distractors != targets
            colours |= distractors
        assert len(colours) > 1  # drawn per episode
    finally:
        backend.close()
