import{b as t}from"./index-AjDo8QR9.js";function r(){return t("p",{class:"lead",children:"Not built yet."})}export{r as NewApp};
