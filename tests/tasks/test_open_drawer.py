from task_checks import check_mjwarp, check_mujoco

TASK = "open_drawer"


def test_open_drawer_on_mujoco():
    check_mujoco(TASK, variations=3, first_description="open the bottom drawer")


def test_open_drawer_on_mjwarp():
    check_mjwarp(TASK)
