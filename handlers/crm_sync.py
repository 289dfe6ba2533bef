"""crm-sync: an existing CRM sync handler, guarded.

The only jobguard lines are the import, the decorator and ``ensure_lease()`` before
each page: a run that lost its lease stops before it writes another page. The stack
sets ``JOBGUARD_TABLE`` and ``JOBGUARD_TRIGGER_QUEUE_URL``.
"""

from __future__ import annotations

import os
from typing import Any

from handlers.jobs import CRM_SYNC
from jobguard import current_run, guarded

PAGES = int(os.environ.get("CRM_SYNC_PAGES", "3"))


@guarded(CRM_SYNC.config())
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    run = current_run()
    synced = 0
    for _page in range(PAGES):
        run.ensure_lease()
        synced += sync_page()
    return {"synced_pages": synced, "run_id": run.run_id, "fence": run.fence}


def sync_page() -> int:
    """One page of the sync (the CRM calls live here in a real integration)."""
    return 1
