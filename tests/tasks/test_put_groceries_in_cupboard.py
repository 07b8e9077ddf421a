"""put_groceries_in_cupboard on both embedded backends, its descriptions as upstream's, and the oracle's grasp heading
chosen clear of the other groceries (the keyframe policy where the nearer heading would brush one)."""

import numpy as np
from placement_checks import YawRange, check_own_yaws, check_placement
from task_checks import check_descriptions, check_mjwarp, check_mujoco, config

from rlbench_vec.backends.mujoco import BACKEND
from rlbench_vec.backends.mujoco.tasks.put_groceries_in_cupboard import GROCERIES

TASK = "put_groceries_in_cupboard"
BODIES = tuple(grocery.body for grocery in GROCERIES)
# RLBench (stepjam/RLBench; PerAct's fork has the same file), rlbench/tasks/put_groceries_in_cupboard.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "put the crackers in the cupboard",
        "pick up the crackers and place it in the cupboard",
        "move the crackers to the bottom shelf",
        "put away the crackers in the cupboard",
    ],
    1: [
        "put the chocolate jello in the cupboard",
        "pick up the chocolate jello and place it in the cupboard",
        "move the chocolate jello to the bottom shelf",
        "put away the chocolate jello in the cupboard",
    ],
    8: [
        "put the sugar in the cupboard",
        "pick up the sugar and place it in the cupboard",
        "move the sugar to the bottom shelf",
        "put away the sugar in the cupboard",
    ],
}


def test_put_groceries_in_cupboard_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_put_groceries_in_cupboard_on_mujoco():
    check_mujoco(TASK, variations=9, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_put_groceries_in_cupboard_on_mjwarp():
    check_mjwarp(TASK)


# Upstream's put_groceries_in_cupboard.py: base_rotation_bounds (0.0, 0.0, -1.), (0.0, 0.0, 1.); each grocery
# SpawnBoundary.sample(g, min_distance=0.1), turned by its default +-3.14 from its pose on the base.
def test_put_groceries_in_cupboard_placement_is_upstreams_each_grocery_its_own_yaw():
    worlds = check_placement(TASK, (YawRange("cupboard", -1.0, 1.0),
                                    *(YawRange(body, -3.14, 3.14, relative_to="cupboard") for body in BODIES)),
                             config(TASK))
    check_own_yaws(worlds, BODIES)


def test_put_groceries_in_cupboard_keyframes_solve_episodes_with_a_grocery_behind_the_hand():
    """Seeds 38 and 48 (planning mode) stand another grocery within 8 cm of the hand heading nearer the
    cupboard; that hand brushed it, squeezing the fingers below 90% open mid-approach, so PerAct's rule read a
    grasp there and the keyframe policy failed both. The hand heads the other way along the grocery's depth."""
    cfg = config(TASK, arm_mode="planning", ignore_collisions_flag=True, max_episode_steps=30,
                 backend_options={"variation": "random", "keyframes": True})
    backend = BACKEND(cfg, 0)
    try:
        for seed in (38, 48):
            backend.reset(seed, None)
            for _ in range(cfg.max_episode_steps):  # a keyframe per step, until solved or out of keyframes
                result = backend.step(np.zeros(9, np.float32))
                if result.terminated:
                    break
            assert result.reward == 1.0, (seed, result.info)
    finally:
        backend.close()
