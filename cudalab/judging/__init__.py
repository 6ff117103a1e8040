"""The judge (issue 60): one candidate kernel, one JSON verdict, the doors a kernel can game closed.

``cudalab judge FAMILY --add FILE.cu:KERNEL`` and ``cudalab.judge(...)`` (:mod:`cudalab.judging.core`);
the object's fields and flags (:mod:`cudalab.judging.verdict`, ``docs/judge-schema.json``); the code scan
(:mod:`cudalab.judging.scan`). The worker's half is :mod:`cudalab.worker.judgeprobe`.
"""

from __future__ import annotations

from cudalab.judging.core import Judge, judge

__all__ = ["Judge", "judge"]
