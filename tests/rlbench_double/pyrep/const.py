from enum import Enum


class RenderMode(Enum):
    OPENGL = 0
    OPENGL_AUXILIARY = 1
    OPENGL_COLOR_CODED = 2
    POV_RAY = 3
    EXTERNAL = 4
    EXTERNAL_WINDOWED = 5
    OPENGL3 = 7
    OPENGL3_WINDOWED = 8
