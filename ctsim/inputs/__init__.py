"""The inputs of a run: one ``Scenario``, resolved once from a preset, a profile and what the user gave.

``scenario`` (the typed node and its rules), ``presets`` (the nodes a run
starts from), ``churn`` (connection schedules).

May import: ``ctsim.core`` and itself.
"""
