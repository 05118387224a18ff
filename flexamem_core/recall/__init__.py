"""What the memory shows: the timeline of old units and the detail a recovery strategy
recovers into the room it leaves."""
