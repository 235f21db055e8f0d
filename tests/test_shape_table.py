"""Shape tables: tuned parameters per workload shape, chosen when a recipe is resolved
(exact, nearest in log2 space among entries that satisfy the constraints, or none), with
errors that name the file, line and field."""

from __future__ import annotations

import argparse

import pytest
from iree.compiler.tools import compile_str
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.cli.sweep_command import shape_arg
from tdsched.schedules.dsl.params import resolve
from tdsched.schedules.frontends.python_api import RecipeBuilder, generator
from tdsched.schedules.frontends.yaml_frontend import parse_recipe
from tdsched.targets.cpu_isa import ISAS, host_isa, vector_isa
from tdsched.targets.cpu_model import BuildCpu, build_cpu, cpu_model_of, host_cpu_model
from tdsched.targets.target import BuildGpu

RECIPE = """\
name: t
workload:
  generator: matmul
  args: {M: "${M}", N: "${N}", K: "${K}"}
parameters: {M: 64, N: 64, K: 64, TM: 8, TK: 16}
kernels:
  - name: mm
    match: {op: linalg.matmul}
    schedule:
      - tile: {sizes: ["${TM}", 16, 0], loop: forall, mapping: workgroup, loops: wg}
      - tile: {sizes: [0, 0, "${TK}"]}
      - vectorize: {}
constraints:
  - K % TK == 0
shapes:
  key: [M, N, K]
  entries:
    - {M: 256, N: 256, K: 256, TM: 32, TK: 64, note: swept}
    - {M: 128, N: 128, K: 128, iree_default: true}
    - {M: 1024, N: 1024, K: 1024, TM: 64, TK: 256}
"""


def resolved(text: str = RECIPE, **params: int) -> dict[str, object]:
    recipe = resolve(parse_recipe(text, "r.yaml"), params)
    choice = recipe.shape_choice
    assert choice is not None
    return {
        **recipe.parameter_dict,
        "how": choice.how,
        "entry": choice.entry.label if choice.entry else None,
        "kernels": len(recipe.kernels),
        "said": choice.describe(),
    }


def test_an_exact_shape_takes_its_entry() -> None:
    r = resolved(M=256, N=256, K=256)
    assert (r["TM"], r["TK"], r["how"], r["kernels"]) == (32, 64, "exact", 1)
    assert "entry M=256,N=256,K=256 (exact match)" in str(r["said"])


def test_a_shape_between_entries_takes_the_nearest_in_log2_space() -> None:
    r = resolved(M=2048, N=2048, K=2048)
    assert (r["entry"], r["how"], r["TM"], r["TK"]) == ("M=1024,N=1024,K=1024", "nearest", 64, 256)
    r = resolved(M=512, N=512, K=512)  # a tie (1 octave each way): the first listed wins
    assert r["entry"] == "M=256,N=256,K=256"


def test_an_entry_breaking_a_constraint_at_this_shape_is_skipped() -> None:
    r = resolved(M=300, N=300, K=320)  # K % 64 == 0 holds, K % 256 does not
    assert r["entry"] == "M=256,N=256,K=256"
    r = resolved(M=300, N=300, K=300)  # neither TK fits: the IREE-default entry is next
    assert r["entry"] == "M=128,N=128,K=128" and r["kernels"] == 0
    assert "skipped M=256,N=256,K=256" in str(r["said"])


def test_an_iree_default_entry_leaves_the_schedules_out_and_says_so() -> None:
    r = resolved(M=128, N=128, K=128)
    assert r["kernels"] == 0 and "IREE's own pipeline" in str(r["said"])


def test_a_tuned_parameter_given_sets_an_iree_default_entry_aside_and_says_so() -> None:
    """Giving TM asks for a schedule (as every candidate of ``sweep --shape`` does), so the
    entry's "no schedule" must not silently drop it."""
    r = resolved(M=128, N=128, K=128, TM=16)
    assert (r["kernels"], r["TM"], r["TK"]) == (1, 16, 16)
    assert "IREE's own pipeline, set aside: TM given" in str(r["said"])


def test_a_value_the_iree_default_entry_holds_itself_sets_nothing_aside() -> None:
    """An entry keeps the --param values its sweep ran with (PAD=0 for a 1x1 conv):
    giving the same runs what it says; another value asks for a schedule."""
    text = RECIPE.replace("{M: 128, N: 128, K: 128, iree_default: true}", "{M: 128, N: 128, "
                          "K: 128, iree_default: true, TK: 16}")  # fmt: skip
    same = resolved(text, M=128, N=128, K=128, TK=16)
    assert same["kernels"] == 0 and "(exact match): IREE's own pipeline (no schedule)" in str(
        same["said"]
    )
    other = resolved(text, M=128, N=128, K=128, TK=32)
    assert other["kernels"] == 1 and "set aside: TK given" in str(other["said"])


def test_a_swept_parameter_given_sets_an_iree_default_entry_aside() -> None:
    only_default = (
        RECIPE.split("    - {M: 256")[0] + "    - {M: 128, N: 128, K: 128, iree_default: true}\n"
    )
    text = only_default + "space:\n  TK: [16, 32]\n"
    assert resolved(text, M=128, N=128, K=128, TK=32)["kernels"] == 1
    assert resolved(text, M=128, N=128, K=128)["kernels"] == 0


def test_explicit_parameters_win_over_the_entry() -> None:
    r = resolved(M=256, N=256, K=256, TM=16)
    assert (r["TM"], r["TK"]) == (16, 64)


def test_the_exact_rule_falls_back_to_the_defaults_and_says_so() -> None:
    text = RECIPE.replace("  key: [M, N, K]\n", "  key: [M, N, K]\n  rule: exact\n")
    r = resolved(text, M=512, N=512, K=512)
    assert (r["entry"], r["how"], r["TM"]) == (None, "none", 8)
    assert "no entry for M=512,N=512,K=512; the recipe's parameter defaults" in str(r["said"])


def test_defaults_that_break_a_constraint_where_no_entry_serves_fall_back_to_iree() -> None:
    # K=40: the default TK 16 does not divide it, and the exact rule has no entry for it:
    # the schedule would tile K partially (slow), so IREE's own pipeline runs and the
    # choice line says why
    exact = RECIPE.replace("  key: [M, N, K]\n", "  key: [M, N, K]\n  rule: exact\n")
    r = resolved(exact, M=40, N=40, K=40)
    assert (r["entry"], r["how"], r["kernels"], r["TK"]) == (None, "none", 0, 16)
    assert str(r["said"]).endswith(
        "the recipe's parameter defaults break 'K % TK == 0' at this shape (a partial tile "
        "runs slowly), so IREE's own pipeline runs (no schedule): sweep it (tdsched sweep "
        "RECIPE --shape M=40,N=40,K=40) or give tuned values with --param"
    )
    # a tuned parameter given on purpose runs, partial tile and all, and is named
    given = resolved(exact, M=40, N=40, K=40, TM=8)
    assert given["kernels"] == 1
    assert str(given["said"]).endswith(
        "the recipe's parameter defaults are used, though they break 'K % TK == 0' at this "
        "shape (a partial tile runs slowly): sweep it (tdsched sweep RECIPE --shape "
        "M=40,N=40,K=40) or give tuned values with --param"
    )
    fitting = resolved(exact, M=40, N=40, K=40, TK=8)
    assert fitting["kernels"] == 1 and "break" not in str(fitting["said"])
    assert "break" not in str(resolved(exact, M=48, N=48, K=48)["said"])  # 48 % 16 == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("{M: 64, N: 64,", "{M: 64, N: 1.5,"), "r.yaml:15: shapes.key: key parameter 'N' must"),
        (("{M: 64, N: 64,", "{M: 64, N: big,"), "r.yaml:18: shapes.entries[0]: N is a string key"),
        (("TK: 64, note", "TQ: 64, note"), "r.yaml:18: shapes.entries[0]: unknown parameter 'TQ'"),
        (("{M: 128, N: 128, K: 128,", "{M: 256, N: 256, K: 256,"), "a second entry for M=256"),
        (("{M: 128, N: 128, K: 128,", "{M: 128, N: 128,"), "missing key value(s) K"),
        (
            ("  key: [M, N, K]\n", "  key: [M, N, K]\n  rule: closest\n"),
            "shapes.rule: got 'closest'; allowed: nearest, exact",
        ),
        (
            ("TK: 256}", "TK: 256, M: 0}"),
            "r.yaml:20: shapes.entries[2]: key values must be positive",
        ),
    ],
)
def test_bad_tables_name_the_file_line_and_field(change: tuple[str, str], message: str) -> None:
    assert message in refusal(RECIPE, change)


def refusal(text: str, change: tuple[str, str]) -> str:
    """The error ``text`` with ``change`` made is refused with."""
    assert change[0] in text
    with pytest.raises(RecipeError) as info:
        parse_recipe(text.replace(*change), "r.yaml")
    return str(info.value)


def test_a_non_integer_shape_at_run_time_is_an_error() -> None:
    with pytest.raises(RecipeError, match="M selects the shape table entry and must be an integer"):
        resolve(parse_recipe(RECIPE, "r.yaml"), {"M": "big"})


def test_the_python_front_end_builds_the_same_table() -> None:
    b = RecipeBuilder("t", workload=generator("matmul", M=64, N=64, K=64))
    b.shapes(["M"], [{"M": 256, "TM": 32}, {"M": 128, "iree_default": True}])
    b.parameters(M=64, TM=8)
    recipe = b.build()
    assert recipe.shapes is not None
    chosen = resolve(recipe, {"M": 200}).parameter_dict
    assert chosen["TM"] == 32  # log2 distance 0.36 to 256, 0.64 to 128


def test_sweep_shape_arguments_are_checked_when_parsed() -> None:
    assert shape_arg("M=256,N=128") == {"M": 256, "N": 128}
    assert shape_arg("M=256,WEIGHTS=constant") == {"M": 256, "WEIGHTS": "constant"}
    for bad in ("M=256,N", "M=-1", "M=0", "M=2.5", "=3", "W=a b"):
        with pytest.raises(argparse.ArgumentTypeError, match="NAME=VALUE pairs"):
            shape_arg(bad)


def test_a_python_recipe_can_take_a_yaml_recipes_table() -> None:
    from tdsched.schedules.frontends.loading import load

    table = load("matmul_x86").shapes
    assert table is not None and len(table.entries) >= 5
    assert load("matmul_x86_py").shapes == table


THREADED = RECIPE.replace(
    "    - {M: 1024, N: 1024, K: 1024, TM: 64, TK: 256}\n",
    "    - {M: 1024, N: 1024, K: 1024, TM: 64, TK: 256}\n"
    "    - {M: 256, N: 256, K: 256, threads: 1, TM: 16, TK: 32}\n"
    "    - {M: 1024, N: 1024, K: 1024, threads: 2, TM: 128, TK: 128}\n"
    "    - {M: 1024, N: 1024, K: 1024, threads: 1, TM: 8, TK: 128}\n",
)


def chosen(
    threads: int | None, text: str = THREADED, cpu: BuildCpu | None = None, **params: int
) -> tuple[object, ...]:
    """The entry ``text``'s table picks at ``params`` on ``threads`` threads of ``cpu``:
    its label, how, the TM it gives and the choice line."""
    recipe = resolve(parse_recipe(text, "r.yaml"), params, threads, "x86", cpu)
    choice = recipe.shape_choice
    assert choice is not None and choice.entry is not None
    return choice.entry.label, choice.how, recipe.parameter_dict["TM"], choice.describe()


def test_an_entry_for_the_run_s_thread_count_wins_over_one_for_any() -> None:
    label, how, tm, said = chosen(1, M=256, N=256, K=256)
    assert (label, how, tm) == ("M=256,N=256,K=256 (1 thread)", "exact", 16)
    assert said == "shape table: entry M=256,N=256,K=256 (1 thread) (exact match): its parameters"
    # on 2 threads the 1-thread entry is one log2 step away: the entry for any count wins
    assert chosen(2, M=256, N=256, K=256)[:3] == ("M=256,N=256,K=256", "exact", 32)


def test_the_thread_count_is_one_more_dimension_of_the_distance() -> None:
    assert chosen(2, M=1024, N=1024, K=1024)[:3] == (
        "M=1024,N=1024,K=1024 (2 threads)",
        "exact",
        128,
    )
    assert chosen(1, M=1024, N=1024, K=1024)[:3] == ("M=1024,N=1024,K=1024 (1 thread)", "exact", 8)
    # 4 threads: the entry for any count is exact; without it, the 2-thread entry is one
    # step away and the 1-thread entry two
    assert chosen(4, M=1024, N=1024, K=1024)[:3] == ("M=1024,N=1024,K=1024", "exact", 64)
    text = THREADED.replace("    - {M: 1024, N: 1024, K: 1024, TM: 64, TK: 256}\n", "")
    label, how, tm, said = chosen(4, text, M=1024, N=1024, K=1024)
    assert (label, how, tm) == ("M=1024,N=1024,K=1024 (2 threads)", "nearest", 128)
    assert "nearest to M=1024,N=1024,K=1024 on 4 threads" in said


def test_a_gpu_target_ignores_thread_counts() -> None:
    # no CPU threads: every 1024^3 entry is exact; the first tuned for a count wins the tie
    assert chosen(None, M=1024, N=1024, K=1024)[:3] == (
        "M=1024,N=1024,K=1024 (2 threads)",
        "exact",
        128,
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("threads: 1, TM: 16", "threads: 0, TM: 16"), "threads must be a positive integer"),
        (
            ("threads: 1, TM: 8", "threads: 2, TM: 8"),
            "a second entry for M=1024,N=1024,K=1024 (2 threads)",
        ),
        (("threads: 1, TM: 16", "threads: one, TM: 16"), "r.yaml:21: shapes.entries[3].threads"),
    ],
)
def test_bad_thread_counts_name_the_entry(change: tuple[str, str], message: str) -> None:
    _refused(THREADED, change, message)


def _refused(text: str, change: tuple[str, str], message: str) -> None:
    """``text`` with ``change`` made is refused with ``message``."""
    assert change[0] in text
    with pytest.raises(RecipeError) as info:
        parse_recipe(text.replace(*change), "r.yaml")
    assert message in str(info.value)


def test_the_python_front_end_takes_thread_counts() -> None:
    b = RecipeBuilder("t", workload=generator("matmul", M=64, N=64, K=64))
    b.shapes(["M"], [{"M": 256, "TM": 32}, {"M": 256, "threads": 1, "TM": 16}])
    b.parameters(M=64, TM=8)
    recipe = b.build()
    assert resolve(recipe, {"M": 256}, 1).parameter_dict["TM"] == 16
    assert resolve(recipe, {"M": 256}, 2).parameter_dict["TM"] == 32
    with pytest.raises(RecipeError, match="threads must be an integer"):
        b.shapes(["M"], [{"M": 256, "threads": "1"}])


KEYED = """\
name: t
workload:
  generator: matmul
  args: {M: "${M}", N: 64, K: 64, weights: "${WEIGHTS}"}
parameters: {M: 64, WEIGHTS: input, TM: 8}
kernels:
  - name: mm
    match: {op: linalg.matmul}
    schedule:
      - tile: {sizes: ["${TM}", 16, 0]}
shapes:
  key: [M, WEIGHTS]
  entries:
    - {M: 256, WEIGHTS: input, TM: 32}
    - {M: 1024, WEIGHTS: input, TM: 64}
    - {M: 1024, WEIGHTS: constant, TM: 16}
"""


def keyed(text: str = KEYED, **params: int | str) -> tuple[object, str, object]:
    recipe = resolve(parse_recipe(text, "r.yaml"), params)
    choice = recipe.shape_choice
    assert choice is not None and choice.entry is not None
    return choice.entry.label, choice.how, recipe.parameter_dict["TM"]


def test_a_string_key_selects_the_entry_tuned_for_its_value() -> None:
    assert keyed(M=1024, WEIGHTS="constant") == ("M=1024,WEIGHTS=constant", "exact", 16)
    assert keyed(M=1024, WEIGHTS="input") == ("M=1024,WEIGHTS=input", "exact", 64)
    # a string key that matches outranks any size distance: 256 is far from 1024, but
    # the only constant entry is at 1024
    assert keyed(M=256, WEIGHTS="constant") == ("M=1024,WEIGHTS=constant", "nearest", 16)
    assert keyed(M=200, WEIGHTS="input") == ("M=256,WEIGHTS=input", "nearest", 32)


def test_without_an_entry_for_its_value_the_nearest_other_serves() -> None:
    text = KEYED.replace("    - {M: 1024, WEIGHTS: constant, TM: 16}\n", "")
    assert keyed(text, M=1024, WEIGHTS="constant") == ("M=1024,WEIGHTS=input", "nearest", 64)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("{M: 256, WEIGHTS: input,", "{M: 256, WEIGHTS: 3,"), "WEIGHTS is a string key"),
        (("{M: 256, WEIGHTS: input,", "{M: 256, WEIGHTS: 1.5,"), "must be an integer or a string"),
        (
            ("{M: 256, WEIGHTS: input,", "{M: big, WEIGHTS: input,"),
            "positive integers here (M='big')",
        ),
    ],
)
def test_bad_string_key_values_name_the_entry(change: tuple[str, str], message: str) -> None:
    said = refusal(KEYED, change)
    assert "r.yaml:1" in said and message in said


def test_a_string_key_given_a_number_at_run_time_is_an_error() -> None:
    with pytest.raises(RecipeError, match="WEIGHTS selects the shape table entry and must be a s"):
        resolve(parse_recipe(KEYED, "r.yaml"), {"WEIGHTS": 3})


def test_the_python_front_end_takes_string_keys() -> None:
    b = RecipeBuilder("t", workload=generator("matmul", M=64, N=64, K=64))
    b.shapes(["M", "W"], [{"M": 256, "W": "input", "TM": 32}, {"M": 256, "W": "constant", "TM": 4}])
    b.parameters(M=64, W="input", TM=8)
    recipe = b.build()
    assert resolve(recipe, {"M": 256, "W": "constant"}).parameter_dict["TM"] == 4
    assert resolve(recipe, {"M": 256}).parameter_dict["TM"] == 32


ISA_KEYED = RECIPE.replace(
    "    - {M: 1024, N: 1024, K: 1024, TM: 64, TK: 256}\n",
    "    - {M: 1024, N: 1024, K: 1024, threads: 2, isa: avx512, TM: 64, TK: 256}\n"
    "    - {M: 1024, N: 1024, K: 1024, threads: 2, isa: avx2, TM: 32, TK: 128}\n"
    "    - {M: 512, N: 512, K: 512, threads: 2, isa: avx512, TM: 16, TK: 64}\n",
)


def on_isa(isa: str | None, text: str = ISA_KEYED, **params: int) -> tuple[object, ...]:
    return chosen(2, text, BuildCpu(isa, None), **params)


def test_an_entry_for_the_build_s_isa_wins() -> None:
    label, how, tm, said = on_isa("avx2", M=1024, N=1024, K=1024)
    assert (label, how, tm) == ("M=1024,N=1024,K=1024 (2 threads, avx2)", "exact", 32)
    assert "on 2 threads (avx2)" not in str(said)  # exact: the run's place is not repeated
    assert on_isa("avx512", M=1024, N=1024, K=1024)[:3] == (
        "M=1024,N=1024,K=1024 (2 threads, avx512)",
        "exact",
        64,
    )
    # nearer in shape, but for another ISA: the 1024^3 AVX2 entry serves 512^3 on AVX2
    assert on_isa("avx2", M=512, N=512, K=512)[:3] == (
        "M=1024,N=1024,K=1024 (2 threads, avx2)",
        "nearest",
        32,
    )


def test_an_entry_for_another_isa_serves_only_where_none_for_the_build_s_does() -> None:
    text = ISA_KEYED.replace(
        "    - {M: 1024, N: 1024, K: 1024, threads: 2, isa: avx2, TM: 32, TK: 128}\n", ""
    )
    # an entry without isa serves every ISA: the 256^3 one, a step away, comes first
    assert on_isa("avx2", text, M=512, N=512, K=512)[:3] == ("M=256,N=256,K=256", "nearest", 32)
    for any_isa in (
        "    - {M: 256, N: 256, K: 256, TM: 32, TK: 64, note: swept}\n",
        "    - {M: 128, N: 128, K: 128, iree_default: true}\n",
    ):
        text = text.replace(any_isa, "")
    label, how, tm, said = on_isa("avx2", text, M=512, N=512, K=512)
    assert (label, how, tm) == ("M=512,N=512,K=512 (2 threads, avx512)", "nearest", 16)
    assert "on 2 threads (avx2); tuned for avx512, none for this build's avx2" in str(said)
    # an unknown ISA (or a GPU) ignores the field: the 512^3 entry is exact
    assert on_isa(None, text, M=512, N=512, K=512)[:2] == (
        "M=512,N=512,K=512 (2 threads, avx512)",
        "exact",
    )


def test_the_python_front_end_takes_isas() -> None:
    b = RecipeBuilder("t", workload=generator("matmul", M=64, N=64, K=64))
    b.shapes(["M"], [{"M": 256, "isa": "avx512", "TM": 32}, {"M": 256, "isa": "avx2", "TM": 16}])
    b.parameters(M=64, TM=8)
    recipe = b.build()
    on = {isa: BuildCpu(isa, None) for isa in ("avx2", "avx512")}
    assert resolve(recipe, {"M": 256}, 2, "x86", on["avx2"]).parameter_dict["TM"] == 16
    assert resolve(recipe, {"M": 256}, 2, "x86", on["avx512"]).parameter_dict["TM"] == 32


GPU_KEYED = RECIPE.replace(
    "    - {M: 1024, N: 1024, K: 1024, TM: 64, TK: 256}\n",
    "    - {M: 1024, N: 1024, K: 1024, gpu: ampere, TM: 128, TK: 32}\n"
    "    - {M: 1024, N: 1024, K: 1024, gpu: generic, TM: 16, TK: 8}\n"
    "    - {M: 512, N: 512, K: 512, gpu: ampere, TM: 64, TK: 16}\n",
)


def on_gpu(machine: BuildCpu | BuildGpu, text: str = GPU_KEYED, **params: int) -> tuple:
    """What ``text``'s table picks for ``machine`` (a Vulkan GPU or, on 2 threads, an x86
    CPU) at ``params``: the entry's label, how, TM and the choice line."""
    target, threads = ("vulkan", None) if isinstance(machine, BuildGpu) else ("x86", 2)
    recipe = resolve(parse_recipe(text, "r.yaml"), params, threads, target, machine)
    choice = recipe.shape_choice
    assert choice is not None and choice.entry is not None
    return choice.entry.label, choice.how, recipe.parameter_dict["TM"], choice.describe()


def test_an_entry_for_the_build_s_gpu_wins() -> None:
    big = {"M": 1024, "N": 1024, "K": 1024}
    label, how, tm, said = on_gpu(BuildGpu("ampere"), **big)
    assert (label, how, tm) == ("M=1024,N=1024,K=1024 (ampere)", "exact", 128)
    # no --gpu: IREE's generic target, which the entries name 'generic'
    label, how, tm, said = on_gpu(BuildGpu(None), **big)
    assert (label, how, tm) == ("M=1024,N=1024,K=1024 (generic)", "exact", 16)
    # nearer in shape, but for another GPU: the generic 1024^3 entry serves 512^3
    label, how, tm, said = on_gpu(BuildGpu(None), M=512, N=512, K=512)
    assert (label, how, tm) == ("M=1024,N=1024,K=1024 (generic)", "nearest", 16)
    assert "nearest to M=512,N=512,K=512 (generic)" in said


def test_an_entry_for_another_gpu_serves_only_where_none_for_the_build_s_does() -> None:
    # rdna3: every entry naming a GPU names another; the one without gpu comes first
    label, how, _, said = on_gpu(BuildGpu("rdna3"), M=512, N=512, K=512)
    assert (label, how) == ("M=256,N=256,K=256", "nearest")
    without_any = GPU_KEYED.replace(
        "    - {M: 256, N: 256, K: 256, TM: 32, TK: 64, note: swept}\n", ""
    ).replace("    - {M: 128, N: 128, K: 128, iree_default: true}\n", "")
    label, how, tm, said = on_gpu(BuildGpu("rdna3"), without_any, M=512, N=512, K=512)
    assert (label, how, tm) == ("M=512,N=512,K=512 (ampere)", "nearest", 64)
    assert "; tuned for ampere, this build's GPU is rdna3" in said
    # an x86 build takes GPU entries only where nothing else serves, and says so
    assert on_gpu(AVX512_CPU, M=512, N=512, K=512)[:2] == ("M=256,N=256,K=256", "nearest")
    label, _, _, said = on_gpu(AVX512_CPU, without_any, M=512, N=512, K=512)
    assert label == "M=512,N=512,K=512 (ampere)"
    assert "; tuned for the Vulkan GPU ampere, this is no Vulkan build" in said


AVX512_CPU = BuildCpu("avx512", "znver5")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("gpu: generic, TM: 16", "gpu: ampere, TM: 16"), "a second entry for M=1024,N=1024,K"),
        (("gpu: generic, TM: 16", "gpu: ' ', TM: 16"), "gpu names the Vulkan GPU the entry"),
    ],
)
def test_bad_gpu_entries_are_refused_at_their_line(change: tuple[str, str], message: str) -> None:
    with pytest.raises(RecipeError, match=rf"r.yaml:\d+: shapes.entries\[\d\]: {message}"):
        parse_recipe(GPU_KEYED.replace(*change), "r.yaml")


def test_the_python_front_end_takes_gpus() -> None:
    b = RecipeBuilder("t", workload=generator("matmul", M=64, N=64, K=64))
    b.shapes(["M"], [{"M": 256, "gpu": "ampere", "TM": 32}, {"M": 256, "gpu": "rdna3", "TM": 16}])
    b.parameters(M=64, TM=8)
    recipe = b.build()
    rdna3 = resolve(recipe, {"M": 256}, None, "vulkan", BuildGpu("rdna3"))
    assert rdna3.parameter_dict["TM"] == 16
    assert (
        resolve(recipe, {"M": 256}, None, "vulkan", BuildGpu("ampere")).parameter_dict["TM"] == 32
    )


@pytest.mark.parametrize(
    ("cpu", "features", "isa"),
    [
        ("haswell", None, "avx2"),
        ("znver4", None, "avx512"),
        ("skylake-avx512", "-avx512f", "avx2"),
        ("haswell", "+avx512f,+avx512bw", "avx512"),
        ("x86-64", None, "sse"),
        ("x86-64", "+avx2,+fma", "avx2"),
        ("some-future-cpu", None, None),
    ],
)
def test_the_vector_isa_of_a_build(cpu: str, features: str | None, isa: str | None) -> None:
    assert vector_isa(cpu, features) == isa
    assert host_isa() in (*ISAS, None)


MODEL_KEYED = ISA_KEYED.replace(
    "    - {M: 512, N: 512, K: 512, threads: 2, isa: avx512, TM: 16, TK: 64}\n",
    "    - {M: 512, N: 512, K: 512, threads: 2, isa: avx512, TM: 16, TK: 64}\n"
    "    - {M: 512, N: 512, K: 512, threads: 2, isa: avx512, cpu: znver5, TM: 8, TK: 128}\n"
    "    - {M: 512, N: 512, K: 512, threads: 1, isa: avx512, cpu: znver5, TM: 4, TK: 32}\n",
)


def on_model(model: str | None, threads: int = 2, **params: int) -> tuple[object, ...]:
    return chosen(threads, MODEL_KEYED, BuildCpu("avx512", model), **params)


def test_an_entry_for_the_build_s_cpu_model_wins_among_equally_near_ones() -> None:
    label, how, tm, said = on_model("znver5", M=512, N=512, K=512)
    assert (label, how, tm) == ("M=512,N=512,K=512 (2 threads, avx512, znver5)", "exact", 8)
    # another model: the entry without cpu is exact, the znver5 one a step away
    label, how, tm, said = on_model("znver4", M=512, N=512, K=512)
    assert (label, how, tm) == ("M=512,N=512,K=512 (2 threads, avx512)", "exact", 16)
    assert "tuned on" not in str(said)
    # the model unknown: cpu is ignored, and the entry without it (listed first) wins
    assert on_model(None, M=512, N=512, K=512)[2] == 16


def test_an_entry_for_another_cpu_model_is_a_step_away() -> None:
    # 1 thread on znver5: its own 1-thread entry is exact
    assert on_model("znver5", 1, M=512, N=512, K=512)[:3] == (
        "M=512,N=512,K=512 (1 thread, avx512, znver5)",
        "exact",
        4,
    )
    # on znver4 that entry is a step away (another model), as far as the 2-thread entry
    # without cpu (another thread count): the tie goes to the one without cpu
    label, how, tm, said = on_model("znver4", 1, M=512, N=512, K=512)
    assert (label, how, tm) == ("M=512,N=512,K=512 (2 threads, avx512)", "nearest", 16)
    assert "nearest to M=512,N=512,K=512 on 1 thread (avx512, znver4)" in str(said)
    # a model's entry does not outrank a nearer shape: 1024^3 keeps its own entry
    assert on_model("znver5", 2, M=1024, N=1024, K=1024)[1:3] == ("exact", 64)
    text = MODEL_KEYED.replace(
        "    - {M: 512, N: 512, K: 512, threads: 2, isa: avx512, TM: 16, TK: 64}\n", ""
    )
    recipe = resolve(
        parse_recipe(text, "r.yaml"),
        {"M": 512, "N": 512, "K": 512},
        2,
        "x86",
        BuildCpu("avx512", "znver4"),
    )
    choice = recipe.shape_choice
    assert choice is not None and choice.entry is not None
    assert choice.entry.cpu == "znver5"
    assert "; tuned on znver5, this build's CPU is znver4" in choice.describe()
    assert choice.as_dict()["entry_cpu"] == "znver5"


@pytest.mark.parametrize(
    ("keyed_by", "change", "message"),
    [
        ("isa", ("isa: avx2, TM: 32", "isa: neon, TM: 32"), "isa must be one of avx512, avx2, sse"),
        (
            "isa",
            ("isa: avx2, TM: 32", "isa: avx512, TM: 32"),
            "a second entry for M=1024,N=1024,K=1024 (2 threads, avx512)",
        ),
        ("cpu", ("cpu: znver5, TM: 8", "cpu: host, TM: 8"), "cpu names the CPU model"),
        (
            "cpu",
            ("threads: 1, isa: avx512, cpu: znver5", "threads: 2, isa: avx512, cpu: znver5"),
            "a second entry for M=512,N=512,K=512 (2 threads, avx512, znver5)",
        ),
    ],
)
def test_bad_isas_and_cpu_models_name_the_entry(
    keyed_by: str, change: tuple[str, str], message: str
) -> None:
    _refused(ISA_KEYED if keyed_by == "isa" else MODEL_KEYED, change, message)


def test_the_python_front_end_takes_cpu_models() -> None:
    b = RecipeBuilder("t", workload=generator("matmul", M=64, N=64, K=64))
    b.shapes(["M"], [{"M": 256, "TM": 32}, {"M": 256, "cpu": "znver5", "TM": 16}])
    b.parameters(M=64, TM=8)
    recipe = b.build()
    on = {model: BuildCpu("avx512", model) for model in ("znver4", "znver5")}
    assert resolve(recipe, {"M": 256}, 2, "x86", on["znver5"]).parameter_dict["TM"] == 16
    assert resolve(recipe, {"M": 256}, 2, "x86", on["znver4"]).parameter_dict["TM"] == 32


def test_the_cpu_model_of_a_named_build() -> None:
    assert build_cpu("znver4") == BuildCpu("avx512", "znver4")
    assert build_cpu("haswell", "+avx512f").model == "haswell"


@pytest.mark.parametrize(
    ("vendor", "family", "model", "flags", "name"),
    [
        ("AuthenticAMD", 26, 2, "avx512f", "znver5"),
        ("AuthenticAMD", 25, 17, "avx512f", "znver4"),
        ("AuthenticAMD", 25, 1, "avx2", "znver3"),
        ("AuthenticAMD", 23, 49, "avx2", "znver2"),
        ("AuthenticAMD", 23, 1, "avx2", "znver1"),
        ("GenuineIntel", 6, 0x8F, "avx512f", "sapphirerapids"),
        ("GenuineIntel", 6, 0x55, "avx512f avx512_vnni", "cascadelake"),
        ("GenuineIntel", 6, 0x55, "avx512f", "skylake-avx512"),
        ("GenuineIntel", 6, 0x3F, "avx2", "haswell"),
        ("GenuineIntel", 6, 0x01, "sse2", None),
        ("AuthenticAMD", 0x15, 2, "avx", None),
        ("HygonGenuine", 24, 1, "avx2", None),
    ],
)
def test_the_cpu_model_of_a_machine(
    vendor: str, family: int, model: int, flags: str, name: str | None
) -> None:
    info = {"vendor_id": vendor, "cpu family": str(family), "model": str(model), "flags": flags}
    assert cpu_model_of(info) == name
    assert cpu_model_of({}) is None


PROBE = """
func.func @probe(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %c = arith.addf %a, %b : tensor<4xf32>
  return %c : tensor<4xf32>
}
"""


@pytest.mark.usefixtures("iree")
def test_this_machine_s_cpu_model_is_the_one_llvm_names() -> None:
    host = build_cpu()
    assert host.model == host_cpu_model() and host.isa == host_isa()
    if host.model is None:
        pytest.skip("tdsched does not name this machine's CPU")
    # the target IREE resolves --iree-llvmcpu-target-cpu=host to
    sources = compile_str(
        PROBE,
        target_backends=["llvm-cpu"],
        extra_args=["--iree-llvmcpu-target-cpu=host", "--compile-to=executable-sources"],
    )
    assert isinstance(sources, bytes) and f'cpu = "{host.model}"'.encode() in sources
