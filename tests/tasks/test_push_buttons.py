from button_plates import check_plates_turn_green
from task_checks import check_mjwarp, check_mujoco

TASK = "push_buttons"


def test_push_buttons_on_mujoco():
    check_mujoco(TASK, variations=50, first_description="push the maroon button")


def test_push_buttons_on_mjwarp():
    check_mjwarp(TASK)


def test_push_buttons_plates_turn_green_when_pressed():
    check_plates_turn_green(TASK)
