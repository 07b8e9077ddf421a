"""A command whose modules take long to load: `python -m slow_start` says "loading" once stop_while_starting
holds the signals, then sleeps where the heavy imports would be. A signal then must end it with the one line."""

if __name__ == "__main__":
    from rlbench_vec.cli import stop_while_starting

    stop_while_starting("python -m slow_start")
    print("loading", flush=True)

import time  # noqa: E402

time.sleep(60)  # a slow import
