"""The ``ctypes`` execution backend (retired: use ``cython``). The hooks are in :mod:`.plugin`."""
