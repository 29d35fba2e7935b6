"""The run stage: traces DIR/tests.jsonl on a real implementation (``scalecheck run``).

The loop (``loop``, ``target``, ``outcome``, ``store``) knows no target; each target is a
wing of its own: ``linux`` (the kernel under QEMU) and ``user`` (a C library under
qemu-user)."""
