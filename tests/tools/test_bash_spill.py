"""bash keeps bounded memory but never loses output: a big output is streamed in full to a spill file."""


from agent_server.tools import BashTool, ToolContext


async def test_big_output_is_spilled_in_full_while_memory_stays_bounded(tmp_path):
    ctx = ToolContext.on_disk(tmp_path, session_dir=tmp_path / "session")
    tool = BashTool()
    args = tool.Args(command="python3 -c \"import sys; [sys.stdout.write(f'{i:09d}\\n') for i in range(600_000)]\"")
    result = await tool.run(args, ctx)
    spill = result.meta["spill"]
    lines = open(spill).read().splitlines()
    assert lines == [f"{i:09d}" for i in range(600_000)]  # 6 MB, every byte, in order
    assert spill in result.text and "omitted" in result.text
    assert len(result.text) < 2_200_000


async def test_small_output_makes_no_spill_file(tmp_path):
    ctx = ToolContext.on_disk(tmp_path, session_dir=tmp_path / "session")
    tool = BashTool()
    result = await tool.run(tool.Args(command="echo hi"), ctx)
    assert "spill" not in result.meta
    assert not (tmp_path / "session" / "spill").exists()
