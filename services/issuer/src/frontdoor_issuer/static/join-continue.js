// The joined browser goes on to the company's join callback at once (a form POST, so the
// assertion never lands in a URL); the button does the same without script.
document.getElementById("poppy-join-continue").submit();
