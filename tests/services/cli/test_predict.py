"""`pdd-emu predict`: the command contract, its numbers and its refusals."""

from __future__ import annotations

import json

import pytest

from services.profiles import gpu_names, model_names
from tests.services.cli.in_process import cli  # noqa: F401  (the fixture)
from tests.tolerance import assert_close

LAYER_8192 = ("predict", "--gpu", "h200-sxm", "--model", "llama3-8b", "--layers", "1", "--prefill-tokens", "8192")


def _json(cli, *argv: str) -> dict:
    code, out, err = cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_one_layer_8192_prefill_is_within_10_percent_of_the_measurement(cli):
    result = _json(cli, *LAYER_8192)
    assert_close(result["seconds"], 6.43e-3, rel=0.10, what="predicted seconds")
    assert result["bound"] == "compute" and result["launch_style"] == "eager"
    assert result["flops"] > 4e12 and result["bytes"] > 0


def test_decode_is_a_cuda_graph_step_and_memory_bound(cli):
    result = _json(cli, "predict", "--gpu", "h200-sxm", "--model", "llama3-70b", "--tp", "4",
                   "--decode-batch", "32", "--context", "8192")
    assert result["launch_style"] == "cuda-graph" and result["bound"] == "memory"


def test_extend_equals_a_prefill_after_cached_tokens(cli):
    common = ("predict", "--gpu", "h20", "--model", "deepseek-v3", "--tp", "8")
    extend = _json(cli, *common, "--extend-tokens", "100", "--context", "60000")
    prefill = _json(cli, *common, "--prefill-tokens", "100", "--cached-tokens", "60000")
    assert extend["seconds"] == prefill["seconds"]


def test_dp_attention_and_ep_change_the_layout_the_step_is_timed_on(cli):
    common = ("predict", "--gpu", "h100-sxm", "--model", "pdd-paper", "--tp", "16", "--prefill-tokens", "8192")
    tp = _json(cli, *common)
    dp = _json(cli, *common, "--dp-attention", "16")
    ep = _json(cli, *common, "--dp-attention", "16", "--ep", "16")
    assert (dp["dp_attention"], ep["ep"]) == (16, 16)
    assert ep["seconds"] < dp["seconds"] < tp["seconds"]  # less replicated work, fewer all-reduces over the NICs


def test_layers_override_predicts_a_fraction_of_the_model(cli):
    common = ("predict", "--gpu", "h200-sxm", "--model", "llama3-8b", "--prefill-tokens", "2048")
    one, full = _json(cli, *common, "--layers", "1"), _json(cli, *common)
    assert 25 < full["seconds"] / one["seconds"] < 40


def test_without_json_one_readable_line(cli):
    code, out, _ = cli(*LAYER_8192)
    assert code == 0
    assert out.count("\n") == 1 and " ms" in out and "compute-bound" in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--gpu", "tpu-v5", "--model", "llama3-8b", "--prefill-tokens", "8"), gpu_names()),
        (("--gpu", "h200-sxm", "--model", "llama4", "--prefill-tokens", "8"), model_names()),
        (("--gpu", "h200-sxm", "--model", "llama3-8b", "--prefill-tokens", "0"), ["positive"]),
        (("--gpu", "h200-sxm", "--model", "llama3-8b", "--prefill-tokens", "-4"), ["positive"]),
        (("--gpu", "h200-sxm", "--model", "llama3-8b", "--prefill-tokens", "8", "--cached-tokens", "-1"),
         ["0 or more"]),
        (("--gpu", "h200-sxm", "--model", "llama3-8b", "--decode-batch", "0", "--context", "9"), ["positive"]),
        (("--gpu", "h200-sxm", "--model", "llama3-8b", "--decode-batch", "2"), ["--context"]),
        (("--gpu", "h200-sxm", "--model", "llama3-8b", "--extend-tokens", "2", "--context", "0"), ["positive"]),
        (("--gpu", "h200-sxm", "--model", "llama3-8b", "--decode-batch", "2", "--context", "131073"), ["131072"]),
        (("--gpu", "h200-sxm", "--model", "llama3-8b", "--prefill-tokens", "131000", "--cached-tokens", "100"),
         ["131072"]),
        (("--gpu", "h200-sxm", "--model", "llama3-8b", "--tp", "3", "--prefill-tokens", "8"), ["1, 2, 4, 8"]),
        (("--gpu", "h200-sxm", "--model", "llama3-8b", "--tp", "0", "--prefill-tokens", "8"), ["1, 2, 4, 8"]),
        (("--gpu", "h200-sxm", "--model", "llama3-8b", "--layers", "0", "--prefill-tokens", "8"), ["1..32"]),
        (("--gpu", "h200-sxm", "--model", "llama3-8b", "--layers", "40", "--prefill-tokens", "8"), ["1..32"]),
        (("--gpu", "h200-sxm", "--model", "llama3-8b", "--prefill-tokens", "8", "--context", "9"), ["--cached-tokens"]),
        (("--gpu", "h200-sxm", "--model", "llama3-8b", "--prefill-tokens", "8", "--decode-batch", "2"),
         ["not allowed"]),
        (("--gpu", "h200-sxm", "--model", "llama3-8b"), ["required"]),
        (("--gpu", "h200-sxm", "--model", "pdd-paper", "--tp", "16", "--dp-attention", "3", "--prefill-tokens", "8"),
         ["divide"]),
        (("--gpu", "h200-sxm", "--model", "llama3-8b", "--tp", "8", "--ep", "8", "--prefill-tokens", "8"), ["MoE"]),
        (("--gpu", "h200-sxm", "--model", "pdd-paper", "--tp", "8", "--ep", "4", "--prefill-tokens", "8"), ["ep=4"]),
    ],
)
def test_bad_input_exits_2_with_a_message_naming_the_choices(cli, argv, says):
    code, out, err = cli("predict", *argv)
    assert code == 2
    assert out == ""
    for word in says:
        assert word in err


def test_help_describes_the_shapes(cli):
    code, out, _ = cli("predict", "--help")
    assert code == 0
    for flag in ("--prefill-tokens", "--extend-tokens", "--decode-batch", "--layers", "--tp", "--dp-attention", "--ep",
                 "--json"):
        assert flag in out


def test_the_installed_entry_point_runs_predict(capsys):
    from services import cli as entry

    assert entry.main([*LAYER_8192, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bound"] == "compute"


def test_a_batch_of_prefills_on_a_large_ep_layout_reports_tokens_per_gpu_and_node(cli):
    layout = ("--gpu", "h100-sxm", "--model", "deepseek-v3", "--tp", "32", "--dp-attention", "32", "--ep", "32")
    code, out, _ = cli("predict", *layout, "--sequences", "128", "--prefill-tokens", "4096", "--json")
    assert code == 0
    result = json.loads(out)
    assert_close(result["tokens_per_s_per_gpu"], 128 * 4096 / result["seconds"] / 32, rel=1e-9)
    assert_close(result["tokens_per_s_per_node"], 8 * result["tokens_per_s_per_gpu"], rel=1e-9)
    code, out, _ = cli("predict", *layout, "--sequences", "128", "--prefill-tokens", "4096", "--tbo", "off", "--json")
    assert json.loads(out)["seconds"] > result["seconds"]


def test_sequences_do_not_go_with_a_decode_batch(cli):
    code, _, err = cli("predict", "--gpu", "h100-sxm", "--model", "llama3-8b", "--decode-batch", "4",
                       "--context", "100", "--sequences", "2")
    assert code == 2 and "--sequences" in err


def test_a_large_ep_decode_counts_one_output_token_per_sequence(cli):
    layout = ("--gpu", "h100-sxm", "--model", "deepseek-v3", "--tp", "72", "--dp-attention", "72", "--ep", "72")
    code, out, _ = cli("predict", *layout, "--decode-batch", str(72 * 256), "--context", "2000", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["launch_style"] == "cuda-graph"
    assert_close(result["tokens_per_s_per_gpu"], 256 / result["seconds"], rel=1e-9)
