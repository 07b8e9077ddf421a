from task_checks import check_mjwarp, check_mujoco

TASK = "insert_onto_square_peg"


def test_insert_onto_square_peg_on_mujoco():
    check_mujoco(TASK, variations=20, first_description="put the ring on the red spoke")


def test_insert_onto_square_peg_on_mjwarp():
    check_mjwarp(TASK)
