"""``fermix doctor`` channel rows, through the real registry with the first-party channels."""

from __future__ import annotations

from pathlib import Path

from fermix_core.boot import assemble
from fermix_core.doctor import CheckResult, DoctorContext, Status, run_checks
from fermix_core.home import FermixHome


def rows(tmp_path: Path, toml: str) -> dict[str, CheckResult]:
    home = FermixHome(tmp_path / "fermix")
    home.ensure()
    home.config_file.write_text(toml)
    assembly = assemble(home, environ={"FERMIX_HOME": str(home.path)})
    config = assembly.load_config()
    results = run_checks(DoctorContext(assembly, config))
    return {r.label: r for r in results if r.check == "channels"}


def test_one_row_per_channel_with_refusals_and_the_streaming_mismatch(tmp_path: Path) -> None:
    found = rows(
        tmp_path,
        "[fermix_channels.whatsapp]\nenabled = true\n"
        '[fermix_channels.signal]\nenabled = true\nowner_user_id = "+15550001"\n'
        'streaming = "draft"\n'
        "[fermix_channels.telegram]\nenabled = false\n"
        "[fermix_channels.acp]\nenabled = false\n",
    )
    assert found["channel discord"].status is Status.SKIP
    assert found["channel telegram"].status is Status.SKIP
    whatsapp = found["channel whatsapp"]
    assert whatsapp.status is Status.WARN
    # Either its adapter is missing here, or it is refused for authorizing nobody.
    assert "owner_user_id" in whatsapp.detail or "cannot be built" in whatsapp.detail
    mismatch = found["channel signal streaming"]
    assert mismatch.status is Status.WARN
    assert 'streaming = "draft"' in mismatch.detail
    assert "block" in (mismatch.fix or "")
