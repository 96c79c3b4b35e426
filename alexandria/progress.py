"""The text progress bar the contract shows (`[██████░░░░] 60%`), for tool results and the CLI."""


def progress_bar(fraction: float, width: int = 20) -> str:
    fraction = max(0.0, min(1.0, fraction))
    filled = round(width * fraction)
    return f"[{'█' * filled}{'░' * (width - filled)}] {fraction:.0%}"
