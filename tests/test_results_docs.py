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
