"""The docs' tables of recorded figures are drawn from results/*.csv: none is stale, and a stale one is redrawn."""
from convnet import results


def test_every_docs_table_matches_its_csv():
    assert results.redraw_docs(check=True) == [], "run: convnet-bench results --docs"


def test_a_stale_table_is_redrawn_from_the_csv():
    text = "before\n<!-- results: gpt2 -->\n| stale | row |\n<!-- /results -->\nafter\n"
    new = results.render_docs(text)
    assert "stale" not in new and new.startswith("before\n") and new.endswith("<!-- /results -->\nafter\n")
    rows = results.read("gpt2")
    assert rows and all(f"| `{r['variant']}` |" in new for r in rows)
    assert results.render_docs(new) == new


def test_the_latest_row_of_a_figure_wins(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text(",".join(results.COLUMNS) + "\n"
                     "v,bench,1.0,ms,GPU A,1,abc,2026-01-01\n"
                     "v,bench,2.0,ms,GPU A,1,def,2026-01-02\n"
                     "v,bench,3.0,ms,GPU B,1,def,2026-01-02\n")
    md = results.markdown("x", table)
    assert "1.0 ms" not in md and "2.0 ms" in md and "3.0 ms" in md


def test_recorded_rows_name_the_commit_given_in_the_environment(tmp_path, monkeypatch):
    """A device call's copy of the tree may carry another .git: CONVNET_COMMIT names the commit measured."""
    from convnet import results
    monkeypatch.setenv("CONVNET_COMMIT", "abc1234+")
    path = tmp_path / "t.csv"
    results.append(path, [("v", "bench", 1.5, "ms")])
    assert results.read("x", path)[0]["commit"] == "abc1234+"
    monkeypatch.delenv("CONVNET_COMMIT")
    results.append(path, [("v", "bench", 2.5, "ms")])
    assert results.read("x", path)[1]["commit"] != "abc1234+"


def test_a_variants_block_draws_titles_and_each_gpus_latest_figure(tmp_path, monkeypatch):
    """<!-- variants: MODEL | BENCHMARK | names --> blocks: a row per named variant with its catalogue title and the
    latest figure of that benchmark on every GPU recorded; '-' where none is; an unknown name is one line."""
    import pytest
    from convnet import catalogue
    from convnet.errors import UsageError
    table = tmp_path / "gpt2.csv"
    table.write_text(",".join(results.COLUMNS) + "\n"
                     "fast,forward B=8 T=1024,20.0,ms,NVIDIA H100 80GB HBM3,1,abc,2026-01-01\n"
                     "fast,forward B=8 T=1024,14.4,ms,NVIDIA H200,1,abc,2026-01-01\n"
                     "fast,forward B=8 T=1024,18.0,ms,NVIDIA H100 80GB HBM3,1,def,2026-01-02\n"
                     "fast,decode,4000,tokens/s,NVIDIA H200,1,def,2026-01-02\n")
    md = results.variant_table("gpt2", "forward B=8 T=1024", ["fast", "baseline"], table)
    lines = md.splitlines()
    assert lines[0] == "| variant | what it is | forward B=8 T=1024 |" and len(lines) == 4
    assert lines[2] == f"| `fast` | {catalogue.get('fast', 'gpt2').title} | 18.0 ms (H100 80GB HBM3), 14.4 ms (H200) |"
    assert lines[3].startswith("| `baseline` |") and lines[3].endswith("| - |")
    real = results.read
    monkeypatch.setattr(results, "read", lambda model, path=None: real(model, table))
    text = "a\n<!-- variants: gpt2 | forward B=8 T=1024 | fast baseline -->\nold\n<!-- /variants -->\nb\n"
    new = results.render_docs(text)
    assert "old" not in new and md in new and results.render_docs(new) == new
    with pytest.raises(UsageError, match="unknown gpt2 variant 'nope'"):
        results.variant_table("gpt2", "forward B=8 T=1024", ["nope"], table)


def test_the_readme_stays_a_quick_start():
    """Issue 40: README.md at most 12 KB; its variant tables are drawn blocks, not hand-kept figures."""
    from pathlib import Path
    text = (Path(results.__file__).resolve().parent.parent / "README.md").read_text()
    assert len(text.encode()) <= 12 * 1024
    assert text.count("<!-- variants: ") == 2
