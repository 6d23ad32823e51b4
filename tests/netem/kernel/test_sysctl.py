from netem.kernel.sysctl import bdp_bytes, planned, wanted_max


def test_bdp_and_the_buffer_it_needs():
    assert bdp_bytes(10e9, 0.1) == 125_000_000
    assert wanted_max(10e9, 0.1) == 250_000_000


def test_only_lower_maxima_are_raised():
    current = {"net.ipv4.tcp_rmem": "4096\t131072\t6291456\n", "net.core.rmem_max": "500000000\n"}
    assert planned(current, 250_000_000) == {"net.ipv4.tcp_rmem": "4096 131072 250000000"}
