"""place_cups on both embedded backends, and its descriptions as upstream's."""

import math

from placement_checks import YawRange, check_own_yaws, check_placement
from task_checks import check_descriptions, check_mjwarp, check_mujoco, config

TASK = "place_cups"
# RLBench (stepjam/RLBench; PerAct's fork has the same file), rlbench/tasks/place_cups.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "place 1 cup on the cup holder",
        "pick up one cup and put it on the mug tree",
        "move 1 mug from the table to the cup holder",
        "pick up one cup and slide its handle onto a spoke on the mug holder",
    ],
    2: [
        "place 3 cups on the cup holder",
        "pick up 3 cups and place them on the holder",
        "move 3 cups from the table to the mug tree",
        "pick up 3 mugs and slide their handles onto the cup holder spokes",
    ],
}


def test_place_cups_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_place_cups_on_mujoco():
    check_mujoco(TASK, variations=3, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_place_cups_on_mjwarp():
    check_mjwarp(TASK)


# Upstream's place_cups.py: base_rotation_bounds [0.0, 0.0, -np.pi / 2], [0.0, 0.0, np.pi / 2]; each cup
# SpawnBoundary.sample(c, min_distance=0.10), turned by its default +-3.14 from its pose on the base.
def test_place_cups_placement_is_upstreams_each_mug_its_own_yaw():
    mugs = ("mug0", "mug1", "mug2")
    worlds = check_placement(TASK, (YawRange("mug_tree", -math.pi / 2, math.pi / 2),
                                    *(YawRange(mug, -3.14, 3.14, relative_to="mug_tree") for mug in mugs)),
                             config(TASK))
    check_own_yaws(worlds, mugs)
