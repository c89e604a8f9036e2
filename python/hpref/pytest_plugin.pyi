from typing import Optional

DEFAULTS: dict
def rank() -> Optional[int]: ...
