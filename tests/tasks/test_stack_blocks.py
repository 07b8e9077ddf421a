"""stack_blocks on both embedded backends, and its descriptions as upstream's."""

import numpy as np
from task_checks import check_descriptions, check_mjwarp, check_mujoco, config

from rlbench_vec.backends.mujoco import BACKEND
from rlbench_vec.backends.mujoco.tasks.base import COLORS
from rlbench_vec.backends.mujoco.tasks.stack_blocks import DISTRACTORS, TARGETS

TASK = "stack_blocks"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/stack_blocks.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "stack 2 red blocks",
        "place 2 of the red cubes on top of each other",
        "pick up and set down 2 red blocks on top of each other",
        "build a tall tower out of 2 red cubes",
        "arrange 2 red blocks in a vertical stack on the table top",
        "set 2 red cubes on top of each other",
    ],
    59: [
        "stack 4 white blocks",
        "place 4 of the white cubes on top of each other",
        "pick up and set down 4 white blocks on top of each other",
        "build a tall tower out of 4 white cubes",
        "arrange 4 white blocks in a vertical stack on the table top",
        "set 4 white cubes on top of each other",
    ],
}


def test_stack_blocks_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_stack_blocks_on_mujoco():
    check_mujoco(TASK, variations=60, descriptions=UPSTREAM_DESCRIPTIONS[0], max_episode_steps=250)


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
