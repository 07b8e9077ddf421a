"""What the main process and its workers share: the framed messages on their pipes and the spec a
worker is spawned with (`protocol`), the shared-memory block that carries actions, observations and
outcomes (`shm`), and process plumbing: spawning, dying with the parent, start-up output (`process`).

May import: errors and config only. Both sides stand on it; it knows neither.
"""
