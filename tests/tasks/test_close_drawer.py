from task_checks import check_mjwarp, check_mujoco

TASK = "close_drawer"


def test_close_drawer_on_mujoco():
    check_mujoco(TASK, variations=3, first_description="close bottom drawer")


def test_close_drawer_on_mjwarp():
    check_mjwarp(TASK)
