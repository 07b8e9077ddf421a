"""The engine's main side: everything between `RLBenchVectorEnv` and the worker processes.

`plan` decides what a vector env will run before anything starts; `pool` starts the workers, sends
each a command per batch (`commands`, `handles`) and collects their replies into the env table
(`envtable`), replacing dead or hung workers (`restarts`) and recycling old ones (`recycling`);
`results` and `output` assemble a batch's rows into what the user gets (numpy views, copies, torch
tensors through `tensors`, observations left on a GPU); `calls` runs backend calls on the workers;
`checks` validates what a caller passes in; `interrupts` holds Ctrl-C back while a reply is taken in.

May import: the package's base modules (errors, config, distributed, spec, the backend registry
`backends` and `backends.base`), `wire`, `display`. Never the worker side (`worker`, which the engine
spawns by name: wire.protocol.WORKER_ENTRY), a backend's implementation, the front or `cli`.
"""
