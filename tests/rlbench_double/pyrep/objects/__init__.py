from pyrep.objects.vision_sensor import VisionSensor  # noqa: F401  (as upstream)
