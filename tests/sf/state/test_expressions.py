import numpy as np
import pytest
from paths import ROOT

from plbjax.errors import BadInput
from plbjax.sf._state.expressions import Expression, node_mask, parse


def node(name, node_type="Front", **props):
    return {"NodeName": name, "NodeType": node_type, **props}


NODES = [
    node("n0", NodeColor="Blue", Disk="150", HasSSD="false"),
    node("n1", NodeColor="Blue", Disk=50, HasSSD=True),
    node("n2", NodeColor="Blue", Disk=50, HasSSD="false"),
    node("n3", NodeColor="Red", Disk=500, HasSSD="true"),
    node("n4", "Back", NodeColor="Blue", Disk=100),  # no HasSSD
]


def mask(source, nodes=NODES):
    return node_mask(source, nodes).tolist()


def test_brief_example():
    expr = "NodeColor == Blue && (Disk >= 100 || HasSSD == true)"
    # n4 lacks HasSSD: even though Disk >= 100 holds, SF fails the whole expression.
    assert mask(expr) == [True, True, False, False, False]
    assert parse(expr).names() == frozenset({"NodeColor", "Disk", "HasSSD"})


def test_node_mask_shape_and_dtype():
    out = node_mask("NodeColor == Blue", NODES)
    assert isinstance(out, np.ndarray) and out.dtype == bool and out.shape == (5,)
    assert node_mask("NodeColor == Blue", []).shape == (0,)


def test_precedence_and_binds_tighter_than_or():
    props = node("n", A="1", B="0", C="1")
    # A==1 || (B==1 && C==0) -> true ; (A==1 || B==1) && C==0 -> false
    assert parse("A == 1 || B == 1 && C == 0").matches(props)
    assert not parse("(A == 1 || B == 1) && C == 0").matches(props)
    assert parse("B == 1 && C == 0 || A == 1").matches(props)


def test_nested_parentheses():
    props = node("n", A="1", B="2")
    assert parse("((A == 1) && ((B == 2)))").matches(props)
    assert not parse("((A == 1) && (!(B == 2)))").matches(props)


def test_not():
    assert mask("!(NodeColor == Blue)") == [False, False, False, True, False]
    assert mask("!!(NodeColor == Red)") == [False, False, False, True, False]
    assert mask("!(NodeColor == Blue) || NodeType == Back") == [False, False, False, True, True]
    assert parse("!false").matches({}) and not parse("!true").matches({})


def test_not_binds_tighter_than_comparison():
    with pytest.raises(BadInput, match=r"unexpected 'NodeColor' at column 2"):
        parse("!NodeColor == Blue")


@pytest.mark.parametrize("disk", ["150", 150, 150.0, " 150", "1.5e2"])
def test_numeric_comparison_string_or_number(disk):
    props = {"Disk": disk}
    assert parse("Disk >= 100").matches(props)
    assert parse("Disk > 149.5").matches(props)
    assert parse("Disk == 150").matches(props)
    assert parse("Disk == 150.0").matches(props)  # numeric, not textual, equality
    assert not parse("Disk < 100").matches(props)
    assert not parse("Disk != 150").matches(props)
    assert parse("Disk <= 1e3").matches(props)


def test_negative_and_fractional_numbers():
    assert parse("Temp > -5").matches({"Temp": "-1.5"})
    assert not parse("Temp > -5").matches({"Temp": -7})


def test_ordering_on_non_numbers_is_an_evaluation_error():
    # SF: "Non numeric parameter with non == comparison operator" -> node not selected,
    # whichever way the comparison is written.
    assert not parse("NodeColor > Alpha").matches({"NodeColor": "Blue"})
    assert not parse("!(NodeColor > Alpha)").matches({"NodeColor": "Blue"})
    assert not parse("Disk >= 100").matches({"Disk": "big"})


def test_string_equality_is_exact_and_case_sensitive():
    assert mask("NodeColor == Blue") == [True, True, True, False, True]
    assert mask("NodeColor != Blue") == [False, False, False, True, False]
    assert mask("NodeColor == blue") == [False] * 5
    assert parse("Disk == big").matches({"Disk": "big"})
    assert not parse("Disk == 150").matches({"Disk": "big"})


def test_quoted_values():
    assert parse("NodeColor == 'Blue'").matches({"NodeColor": "Blue"})
    assert parse('NodeColor == "Dark Blue"').matches({"NodeColor": "Dark Blue"})
    assert parse("Zone == 'a&&b'").matches({"Zone": "a&&b"})


def test_booleans():
    assert parse("HasSSD == true").matches({"HasSSD": True})
    assert parse("HasSSD == true").matches({"HasSSD": "true"})
    assert parse("HasSSD == false").matches({"HasSSD": False})
    assert not parse("HasSSD == true").matches({"HasSSD": False})
    assert parse("HasSSD != true").matches({"HasSSD": "false"})
    # SF compares strings exactly: 'True' is not 'true'.
    assert not parse("HasSSD == true").matches({"HasSSD": "True"})
    assert mask("true") == [True] * 5 and mask("false") == [False] * 5


def test_node_name_and_node_type_builtins():
    assert mask("NodeName == n3") == [False, False, False, True, False]
    assert mask("NodeType == Back") == [False, False, False, False, True]
    assert mask("NodeType != Back && NodeName != n0") == [False, True, True, True, False]
    assert parse("NodeName == _Node_0").matches({"NodeName": "_Node_0"})
    assert parse("FaultDomain == fd:/dc1/r0").matches({"FaultDomain": "fd:/dc1/r0"})


def test_missing_property_fails_whole_expression():
    props = node("n", A="1")
    assert not parse("Missing == x").matches(props)
    assert not parse("Missing != x").matches(props)
    assert not parse("!(Missing == x)").matches(props)
    assert not parse("A == 1 || Missing == x").matches(props)
    assert not parse("Missing == x || A == 1").matches(props)
    assert not parse("A == 1 && !(Missing == x)").matches(props)


def test_property_names_are_case_sensitive():
    assert not parse("nodecolor == Blue").matches({"NodeColor": "Blue"})


def test_starts_with_operators():
    assert parse("NodeName ^ web").matches({"NodeName": "web_3"})
    assert not parse("NodeName ^ web").matches({"NodeName": "db_1"})
    assert parse("NodeName !^ web").matches({"NodeName": "db_1"})
    assert not parse("Disk ^ 1").matches({"Disk": "150"})  # numeric operands: SF error


def test_policy_clauses_do_not_filter():
    expr = parse("NodeColor == Blue && FDPolicy ~ Nonpacking")
    assert expr.matches({"NodeColor": "Blue"})
    assert not expr.matches({"NodeColor": "Red"})
    assert expr.names() == frozenset({"NodeColor"})


@pytest.mark.parametrize("source", [None, "", "   ", "\t\n"])
def test_empty_expression_selects_every_node(source):
    assert mask(source) == [True] * 5
    assert parse(source).names() == frozenset()
    assert parse(source).matches({})


def test_parse_is_cached_and_immutable():
    a = parse("NodeColor == Blue")
    assert a is parse("NodeColor == Blue")
    assert isinstance(a, Expression) and a.source == "NodeColor == Blue"
    with pytest.raises(AttributeError):
        a.source = "x"  # type: ignore[misc]


def test_error_message_matches_brief_format():
    with pytest.raises(BadInput) as info:
        parse("NodeColor == && x")
    message = str(info.value)
    assert message.startswith("PlacementConstraints 'NodeColor == && x': unexpected '&&' at column 14")


@pytest.mark.parametrize(
    "source, needle",
    [
        ("(NodeColor == Blue", "unexpected end of expression at column 19 (expected ')' to close '(' at column 1)"),
        ("NodeColor == Blue)", "unexpected ')' at column 18"),
        ("((A == 1) && B == 2", "expected ')' to close '(' at column 1"),
        ("()", "unexpected ')' at column 2"),
        ("NodeColor == Blue &&", "unexpected end of expression at column 21"),
        ("&& NodeColor == Blue", "unexpected '&&' at column 1"),
        ("NodeColor == Blue || || A == 1", "unexpected '||' at column 22"),
        ("NodeColor ==", "unexpected end of expression at column 13 (expected a value after '==')"),
        ("== Blue", "unexpected '==' at column 1"),
        ("NodeColor == Blue A == 1", "unexpected 'A' at column 19"),
        ("NodeColor", "expected a comparison operator after 'NodeColor'"),
        ("A == 1 == 2", "unexpected '==' at column 8"),
        ("NodeColor = Blue", "unexpected character '=' at column 11 (did you mean '=='?)"),
        ("A == 1 & B == 2", "unexpected character '&' at column 8 (did you mean '&&'?)"),
        ("NodeColor == Bl$ue", "unexpected character '$' at column 16"),
        ("NodeColor == 'Blue", "unterminated string starting at column 14"),
        ("NodeName ^P x", "primary-only operator '^P' at column 10"),
        ("!", "unexpected end of expression at column 2"),
    ],
)
def test_bad_syntax_names_the_token(source, needle):
    with pytest.raises(BadInput) as info:
        parse(source)
    message = str(info.value)
    assert message.startswith(f"PlacementConstraints '{source}': ")
    assert needle in message


def test_bad_input_is_a_value_error_and_non_strings_rejected():
    with pytest.raises(ValueError):
        parse("(")
    with pytest.raises(BadInput, match="must be a string"):
        parse(42)  # type: ignore[arg-type]
    with pytest.raises(BadInput):
        node_mask("NodeColor ==", NODES)


def test_a_bad_constraint_in_a_state_names_the_file_and_the_service(tmp_path):
    """Issue 38: the error of a state with a bad placement constraint names the file, the service
    and its key, at load time (exit 2 before any search)."""
    import yaml

    from plbjax import load_state

    doc = yaml.safe_load((ROOT / "examples" / "small.yaml").read_text())
    doc["Services"][0]["PlacementConstraints"] = "NodeType == == FrontEnd"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(BadInput) as info:
        load_state(path)
    name = doc["Services"][0]["ServiceName"]
    assert str(info.value).startswith(
        f"{path}: Services[0].PlacementConstraints of service {name!r}: 'NodeType == == FrontEnd': unexpected '=='"
    )
