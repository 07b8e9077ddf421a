"""insert_onto_square_peg on both embedded backends, and its descriptions as upstream's."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco

TASK = "insert_onto_square_peg"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/insert_onto_square_peg.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "put the ring on the red spoke",
        "slide the ring onto the red colored spoke",
        "place the ring onto the red spoke",
    ],
    19: [
        "put the ring on the white spoke",
        "slide the ring onto the white colored spoke",
        "place the ring onto the white spoke",
    ],
}


def test_insert_onto_square_peg_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_insert_onto_square_peg_on_mujoco():
    check_mujoco(TASK, variations=20, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_insert_onto_square_peg_on_mjwarp():
    check_mjwarp(TASK)
