"""``python -m tools port`` and ``python -m tools check``: port CUDA kernels to HIP in one command.

The pieces, in the order a run uses them:

- ``sources``  : find the project headers a file includes and stage them (hipify never writes a source);
- ``toolkits`` : find nvcc and HIP-Clang through the build backend's own detection (buildcore.toolchain);
- ``engine``   : hipify + lint, compile both sides, map compiler messages back to CUDA lines, diff;
- ``render``   : the terminal view (colour and progress on a TTY, plain text when piped or under CI);
- ``report``   : the reviewer's report file (Markdown or HTML);
- ``manifest`` : ``--add``, registering a kernel in csrc/manifest.toml;
- ``cli`` / ``check`` : the two commands.

See docs/port.md.
"""
