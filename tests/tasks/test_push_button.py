from button_plates import check_plates_turn_green
from task_checks import check_mjwarp, check_mujoco

TASK = "push_button"


def test_push_button_on_mujoco():
    check_mujoco(TASK, variations=18, first_description="push the maroon button")


def test_push_button_on_mjwarp():
    check_mjwarp(TASK)


def test_push_button_plates_turn_green_when_pressed():
    check_plates_turn_green(TASK)
