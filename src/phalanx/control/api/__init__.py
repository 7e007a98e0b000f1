"""HTTP API under ``/api/v1``: one router per resource. Routes record intent; they never
call the engine (the controller decides)."""
