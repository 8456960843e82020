"""Team sync over git: ``lore sync`` (engine.py), the record-aware merge driver (merge.py, driver.py).

git itself is only ever run through ``lore.sync.git``.
"""
