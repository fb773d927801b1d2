import pytest

import tiny_npu


@pytest.fixture(scope="session")
def rt():
    """One tiny_npu runtime per test process (device 0), shut down at the end."""
    runtime = tiny_npu.init(0)
    yield runtime
    tiny_npu.shutdown()
