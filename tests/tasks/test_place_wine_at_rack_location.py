"""place_wine_at_rack_location on both embedded backends, and its descriptions as upstream's."""

import math

from placement_checks import YawRange, check_placement
from task_checks import check_descriptions, check_mjwarp, check_mujoco, config

TASK = "place_wine_at_rack_location"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/place_wine_at_rack_location.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "stack the wine bottle to the middle of the rack",
        "slide the bottle onto the middle part of the rack",
        "put the wine on the middle",
        "leave the wine on the middle section of the shelf",
        "grasp the bottle and put it away on the middle",
    ],
    2: [
        "stack the wine bottle to the right of the rack",
        "slide the bottle onto the right part of the rack",
        "put the wine on the right",
        "leave the wine on the right section of the shelf",
        "grasp the bottle and put it away on the right",
    ],
}


def test_place_wine_at_rack_location_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_place_wine_at_rack_location_on_mujoco():
    check_mujoco(TASK, variations=3, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_place_wine_at_rack_location_on_mjwarp():
    check_mjwarp(TASK)


# Upstream's place_wine_at_rack_location.py: base_rotation_bounds [0, 0, -np.pi / 4.], [0, 0, np.pi / 4.].
def test_place_wine_at_rack_location_placement_is_upstreams():
    check_placement(TASK, (YawRange("rack", -math.pi / 4, math.pi / 4),), config(TASK))
