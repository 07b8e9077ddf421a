"""place_shape_in_shape_sorter on both embedded backends, its descriptions as upstream's, and a state that does not tell
the chosen shape."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco
from upstream_checks import check_state_hides_target

from rlbench_vec.backends.mujoco.tasks.place_shape_in_shape_sorter import SHAPES

TASK = "place_shape_in_shape_sorter"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/place_shape_in_shape_sorter.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "put the cube in the shape sorter",
        "pick up the cube and put it in the sorter",
        "place the cube into its slot in the shape sorter",
        "slot the cube into the shape sorter",
    ],
    2: [
        "put the triangular prism in the shape sorter",
        "pick up the triangular prism and put it in the sorter",
        "place the triangular prism into its slot in the shape sorter",
        "slot the triangular prism into the shape sorter",
    ],
}


def test_place_shape_in_shape_sorter_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_place_shape_in_shape_sorter_on_mujoco():
    check_mujoco(TASK, variations=5, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_place_shape_in_shape_sorter_on_mjwarp():
    check_mjwarp(TASK)


def test_place_shape_in_shape_sorter_state_does_not_tell_the_chosen_shape():
    check_state_hides_target(TASK, [(0, v) for v in range(5)], lambda sim, v: sim.world.position(SHAPES[v]))
