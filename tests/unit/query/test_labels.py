"""Label selectors, against the cases of apimachinery's labels/selector_test.go, plus properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pods_api.core.api.statuserrors import SelectorError
from pods_api.core.query.labels import LabelSelector, Op, Requirement, Token, lex, parse_labels

# TestSelectorParse: these restring to themselves with the spaces removed.
LABEL_GOOD = ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5"]

# TestSelectorParse and TestSetSelectorParser: every invalid input.
LABEL_BAD = [
    "x=a||y=b",
    "x==a==b",
    "!x=a",
    "x<a",
    "x,,y",
    ",x,y",
    "x nott in (y)",
    "a in (xyz),",
    "a in (xyz)b notin ()",
    "a in (xyz abc)",
    "a notin(",
    "a (",
    "(",
    # NewRequirement's cases (TestRequirementConstructor), written as selectors
    "a" * 254,
    "x16=" + "a" * 254,
    "x>bar",
    "x<bar",
    "x>",
]


@pytest.mark.parametrize("text", LABEL_GOOD)
def test_label_selectors_restring_as_the_api_server_does(text: str) -> None:
    assert str(parse_labels(text)) == text.replace(" ", "")


@pytest.mark.parametrize("text", LABEL_BAD)
def test_invalid_label_selectors_say_where(text: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_labels(text)
    assert 0 <= caught.value.position <= len(text)
    assert f"at position {caught.value.position}" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "position", "problem"),
    [
        ("x==a==b", 4, "found '==', expected: ',' or end of string"),
        ("a in (xyz),", 11, "expected: identifier after ','"),
        ("a in (xyz abc)", 10, "found 'abc', expected: ',' or ')'"),
        ("x nott in (y)", 2, "found 'nott', expected: in, notin, =, ==, !=, gt, lt"),
        ("app=web,Tier!=-db", 14, "invalid value '-db' for label 'Tier'"),
        ("example.com/a/b", 0, "invalid label key"),
        ("Example.com/a", 0, "prefix part must be a lowercase DNS subdomain"),
    ],
)
def test_label_errors_name_the_problem_and_its_position(text: str, position: int, problem: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_labels(text)
    assert caught.value.position == position
    assert problem in str(caught.value)


# TestSetSelectorParser: (input, expected requirements in key order).
SET_PARSER = [
    ("", ()),
    ("\rx", (("x", Op.EXISTS, ()),)),
    (
        "this-is-a-dns.domain.com/key-with-dash",
        (("this-is-a-dns.domain.com/key-with-dash", Op.EXISTS, ()),),
    ),
    (
        "this-is-another-dns.domain.com/key-with-dash in (so,what)",
        (("this-is-another-dns.domain.com/key-with-dash", Op.IN, ("so", "what")),),
    ),
    (
        "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
        (("0.1.2.domain/99", Op.NOT_IN, ("10.10.100.1", "tick.tack.clock")),),
    ),
    ("foo  in\t (abc)", (("foo", Op.IN, ("abc",)),)),
    ("x notin\n (abc)", (("x", Op.NOT_IN, ("abc",)),)),
    ("x  notin\t\t\t(abc,def)", (("x", Op.NOT_IN, ("abc", "def")),)),
    ("x in (abc,def)", (("x", Op.IN, ("abc", "def")),)),
    ("x in (abc,)", (("x", Op.IN, ("", "abc")),)),
    ("x in (abc,abc)", (("x", Op.IN, ("abc",)),)),
    ("x in ()", (("x", Op.IN, ("",)),)),
    ("x in (a,,)", (("x", Op.IN, ("", "a")),)),
    ("x in (a,,,)", (("x", Op.IN, ("", "a")),)),
    ("x in (a,,,,,,)", (("x", Op.IN, ("", "a")),)),
    ("x in (a,,a,,a,,a,,)", (("x", Op.IN, ("", "a")),)),
    (
        "x notin (abc,,def),bar,z in (),w",
        (
            ("bar", Op.EXISTS, ()),
            ("w", Op.EXISTS, ()),
            ("x", Op.NOT_IN, ("", "abc", "def")),
            ("z", Op.IN, ("",)),
        ),
    ),
    ("x,y in (a)", (("x", Op.EXISTS, ()), ("y", Op.IN, ("a",)))),
    ("x=a", (("x", Op.EQUALS, ("a",)),)),
    ("x>1", (("x", Op.GREATER_THAN, ("1",)),)),
    ("x<7", (("x", Op.LESS_THAN, ("7",)),)),
    ("x=a,y!=b", (("x", Op.EQUALS, ("a",)), ("y", Op.NOT_EQUALS, ("b",)))),
    (
        "x=a,y!=b,z in (h,i,j)",
        (("x", Op.EQUALS, ("a",)), ("y", Op.NOT_EQUALS, ("b",)), ("z", Op.IN, ("h", "i", "j"))),
    ),
    ("x notin ( )", (("x", Op.NOT_IN, ("",)),)),
    ("x notin (, a)", (("x", Op.NOT_IN, ("", "a")),)),
    ("a ", (("a", Op.EXISTS, ()),)),
    ("a in (x,y,notin, z,in)", (("a", Op.IN, ("in", "notin", "x", "y", "z")),)),
    ("notin=in", (("notin", Op.EQUALS, ("in",)),)),
    ("x==a", (("x", Op.DOUBLE_EQUALS, ("a",)),)),
]


@pytest.mark.parametrize(("text", "expected"), SET_PARSER)
def test_set_selector_parser_cases(text: str, expected: tuple[tuple[str, Op, tuple[str, ...]], ...]) -> None:
    assert parse_labels(text) == LabelSelector(tuple(Requirement(k, op, v) for k, op, v in expected))


def test_to_string_cases() -> None:
    # TestToString, as parsed selectors.
    assert str(parse_labels("x in (def,abc),y notin (jkl),z")) == "x in (abc,def),y notin (jkl),z"
    assert str(parse_labels("x notin (abc,def),y!=jkl,!z")) == "x notin (abc,def),y!=jkl,!z"
    assert (
        str(parse_labels("x notin (abc),y in (jkl,mno),z notin ()"))
        == "x notin (abc),y in (jkl,mno),z notin ()"
    )
    assert str(parse_labels("x=abc,y==jkl,z!=a")) == "x=abc,y==jkl,z!=a"
    assert str(parse_labels("x>2,y<8,z")) == "x>2,y<8,z"
    # TestDeterministicParse
    assert str(parse_labels("x=a,a=x")) == str(parse_labels("a=x,x=a")) == "a=x,x=a"


# TestLexer: one token each; literal is the input.
LEXER = [
    ("", Token.END),
    (",", Token.COMMA),
    ("notin", Token.NOT_IN),
    ("in", Token.IN),
    ("=", Token.EQUALS),
    ("==", Token.DOUBLE_EQUALS),
    (">", Token.GREATER_THAN),
    ("<", Token.LESS_THAN),
    ("!", Token.DOES_NOT_EXIST),  # the longest valid token found
    ("!=", Token.NOT_EQUALS),
    ("(", Token.OPEN_PAR),
    (")", Token.CLOSED_PAR),
    ("~", Token.IDENTIFIER),  # not special: part of an identifier
    ("||", Token.IDENTIFIER),
]


@pytest.mark.parametrize(("text", "token"), LEXER)
def test_lexer(text: str, token: Token) -> None:
    first = lex(text)[0]
    assert (first.token, first.literal) == (token, text)


ID, IN, NOTIN, OP, CP, C = (
    Token.IDENTIFIER,
    Token.IN,
    Token.NOT_IN,
    Token.OPEN_PAR,
    Token.CLOSED_PAR,
    Token.COMMA,
)

# TestLexerSequence / TestParserLookahead: the token sequence, END included.
SEQUENCES = [
    ("key in ( value )", [ID, IN, OP, ID, CP]),
    ("key notin ( value )", [ID, NOTIN, OP, ID, CP]),
    ("key in ( value1, value2 )", [ID, IN, OP, ID, C, ID, CP]),
    ("key", [ID]),
    ("!key", [Token.DOES_NOT_EXIST, ID]),
    ("()", [OP, CP]),
    ("", []),
    ("x in (),y", [ID, IN, OP, CP, C, ID]),
    ("== != (), = notin", [Token.DOUBLE_EQUALS, Token.NOT_EQUALS, OP, CP, C, Token.EQUALS, NOTIN]),
    ("key>2", [ID, Token.GREATER_THAN, ID]),
    ("key<1", [ID, Token.LESS_THAN, ID]),
]


@pytest.mark.parametrize(("text", "tokens"), SEQUENCES)
def test_lexer_sequences_and_positions(text: str, tokens: list[Token]) -> None:
    lexemes = lex(text)
    assert [x.token for x in lexemes] == [*tokens, Token.END]
    for x in lexemes[:-1]:
        assert text[x.position : x.position + len(x.literal)] == x.literal


LABELS = {"foo": "bar", "baz": "blah"}


MATCHES: list[tuple[str, dict[str, str], bool]] = [
    # TestSelectorMatches
    ("", {"x": "y"}, True),
    ("x=y", {"x": "y"}, True),
    ("x=y,z=w", {"x": "y", "z": "w"}, True),
    ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
    ("notin=in", {"notin": "in"}, True),
    ("x", {"x": "z"}, True),
    ("!x", {"y": "z"}, True),
    ("x>1", {"x": "2"}, True),
    ("x<1", {"x": "0"}, True),
    ("x=z", {}, False),
    ("x=y", {"x": "z"}, False),
    ("x=y,z=w", {"x": "w", "z": "w"}, False),
    ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
    ("x", {"y": "z"}, False),
    ("!x", {"x": "z"}, False),
    ("x>1", {"x": "0"}, False),
    ("x<1", {"x": "2"}, False),
    ("foo=bar", LABELS, True),
    ("baz=blah", LABELS, True),
    ("foo=bar,baz=blah", LABELS, True),
    ("foo=blah", LABELS, False),
    ("baz=bar", LABELS, False),
    ("foo=bar,foobar=bar,baz=blah", LABELS, False),
    # TestRequirementSelectorMatching
    ("x in (foo),y notin (alpha)", {"x": "foo", "y": "baz"}, True),
    ("x in (foo),y in (alpha)", {"x": "foo", "y": "baz"}, False),
    ("x notin (),y", {"y": ""}, True),
    ("!x,y", {"y": ""}, True),
    ("x notin (),!y", {"y": ""}, False),
    ("x in ()", {"y": "baz"}, False),
    ("z>1", {"z": "2"}, True),
    ("z>1", {"z": "v2"}, False),
]


@pytest.mark.parametrize(("text", "labels", "expected"), MATCHES)
def test_label_matching(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_labels(text).matches(labels) is expected


_ALNUM = "abcz019"

_NAME = st.builds(
    lambda first, middle, last: first + middle + last,
    st.sampled_from(_ALNUM),
    st.text(alphabet=_ALNUM + "._-", max_size=6),
    st.sampled_from(_ALNUM),
) | st.sampled_from(_ALNUM)

_PREFIX = st.lists(st.text(alphabet="abc09", min_size=1, max_size=4), min_size=1, max_size=3).map(".".join)

_KEY = _NAME | st.tuples(_PREFIX, _NAME).map("/".join)

_VALUE = st.one_of(st.just(""), _NAME)


@st.composite
def requirements(draw: st.DrawFn) -> Requirement:
    key = draw(_KEY)
    op = draw(st.sampled_from(list(Op)))
    if op in (Op.EXISTS, Op.DOES_NOT_EXIST):
        return Requirement(key, op)
    if op in (Op.IN, Op.NOT_IN):
        return Requirement(key, op, tuple(sorted(draw(st.sets(_VALUE, min_size=1, max_size=4)))))
    if op in (Op.GREATER_THAN, Op.LESS_THAN):
        return Requirement(key, op, (str(draw(st.integers(0, 2**63 - 1))),))
    return Requirement(key, op, (draw(_VALUE),))


@given(st.lists(requirements(), max_size=5))
def test_parse_of_str_gives_the_selector_back(reqs: list[Requirement]) -> None:
    sel = LabelSelector(tuple(sorted(reqs, key=lambda r: (r.key, str(r)))))
    assert parse_labels(str(sel)) == sel
    shuffled = ",".join(str(r) for r in reversed(reqs))
    assert parse_labels(shuffled).key == sel.key


@given(st.text(alphabet="ab=!(),<> \tinotx1", max_size=20))
def test_any_text_parses_or_fails_with_a_position(text: str) -> None:
    try:
        sel = parse_labels(text)
    except SelectorError as e:
        assert 0 <= e.position <= len(text)
    else:
        assert parse_labels(str(sel)) == sel


@given(st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["", "1", "2"]), max_size=2), _VALUE)
def test_in_of_one_value_is_equals(labels: dict[str, str], value: str) -> None:
    one = parse_labels(f"a in ({value})")
    assert one.matches(labels) is parse_labels(f"a={value}").matches(labels)
    assert parse_labels(f"a notin ({value})").matches(labels) is parse_labels(f"a!={value}").matches(labels)


def test_set_membership_is_one_lookup_whatever_the_set_size() -> None:
    """`in` and `notin` over a set, with a missing label in no set (`notin` matches it)."""
    values = [f"v{i}" for i in range(1000)]
    inside = parse_labels(f"app in ({','.join(values)})")
    outside = parse_labels(f"app notin ({','.join(values)})")
    assert inside.matches({"app": "v999"}) and not inside.matches({}) and not inside.matches({"app": "x"})
    assert not outside.matches({"app": "v0"}) and outside.matches({}) and outside.matches({"app": "x"})
