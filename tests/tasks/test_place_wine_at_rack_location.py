"""place_wine_at_rack_location on both embedded backends, and its descriptions as upstream's."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco

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
