from task_checks import check_mjwarp, check_mujoco

TASK = "pick_up_cup"


def test_pick_up_cup_on_mujoco():
    check_mujoco(TASK, variations=20, first_description="pick up the red cup")


def test_pick_up_cup_on_mjwarp():
    check_mjwarp(TASK)
