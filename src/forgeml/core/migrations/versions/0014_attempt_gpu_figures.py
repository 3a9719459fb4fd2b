"""NVML figures of each job attempt: mean GPU utilisation, peak GPU memory, energy.

NULL where the attempt held no GPU or the machine has no NVML (absent, not 0).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # nullable columns: a plain ALTER TABLE ADD COLUMN on SQLite and PostgreSQL alike
    op.add_column("job_attempts", sa.Column("gpu_utilization", sa.Float, nullable=True))
    op.add_column("job_attempts", sa.Column("gpu_peak_memory_bytes", sa.BigInteger, nullable=True))
    op.add_column("job_attempts", sa.Column("gpu_energy_joules", sa.Float, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_attempts") as table:
        table.drop_column("gpu_energy_joules")
        table.drop_column("gpu_peak_memory_bytes")
        table.drop_column("gpu_utilization")
