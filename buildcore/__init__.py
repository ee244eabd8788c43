"""What the build backend and the tools both stand on: the error base, running tools, the build settings,
the kernel manifest and toolchain detection (see docs/design.md, "Layers")."""
