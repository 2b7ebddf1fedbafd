"""Tests of ctwatch: its sources on real kernel objects, its page, its server and its deploy files."""
